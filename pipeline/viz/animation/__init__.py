"""Animating a simulated run: where every item is at each event (:mod:`.frames`, numpy
only, with the frames' window in :mod:`.window` and a downstream's queue and orphaned
requests in :mod:`.downstream`) and the matplotlib artist that draws it in place
(:mod:`.artist`); the widget with its ``Play`` control is :mod:`pipeline.viz.widgets.animate`."""
