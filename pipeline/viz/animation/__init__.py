"""Animating a simulated run: where every item is at each event (:mod:`.frames`, numpy
only) and the matplotlib artist that draws it in place (:mod:`.artist`); the widget
with its ``Play`` control is :mod:`pipeline.viz.widgets.animate`."""
