"""``report.html``: a plan as one self-contained page (:mod:`.page`), its sections
(:mod:`.sections`, the headroom's in :mod:`.headroom`) and their escaped cells
(:mod:`.cells`)."""
