"""ipywidgets over simulations: the explorer (:mod:`.explorer`), the small focused
widget (:mod:`.focused`), plan and stage explorers, and a live real-time run
(:mod:`.live_run`); :mod:`.shown` is what a notebook displays."""
