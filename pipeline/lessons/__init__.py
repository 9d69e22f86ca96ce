"""The notebooks' own widgets: one knob-sized question of one notebook each.

They are teaching material built on :mod:`pipeline.viz`, kept apart from the general
figures and widgets there; nothing in the library imports them.
"""

from __future__ import annotations

from .._extras import require

require("pipeline.lessons", "viz")  # the lessons draw with matplotlib and ipywidgets
del require  # a check, not a name of this package

from ..viz.widgets.focused import FocusedWidget, slider
from .widgets import burst_widget, drain_widget, knee_widget, provider_widget, retry_widget

# FocusedWidget and slider are here so that a notebook can build its own one-question
# widget in its cells, where the widget's code is part of the lesson (notebook 10).
__all__ = [
    "FocusedWidget",
    "burst_widget",
    "drain_widget",
    "knee_widget",
    "provider_widget",
    "retry_widget",
    "slider",
]
