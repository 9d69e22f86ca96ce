"""The notebooks' own widgets: one knob-sized question of one notebook each.

They are teaching material built on :mod:`pipeline.viz`, kept apart from the general
figures and widgets there; nothing in the library imports them.
"""

from __future__ import annotations

from .._extras import require

require("pipeline.lessons", "viz")  # the lessons draw with matplotlib and ipywidgets
del require  # a check, not a name of this package

from .widgets import burst_widget, drain_widget, knee_widget, provider_widget, retry_widget

__all__ = ["burst_widget", "drain_widget", "knee_widget", "provider_widget", "retry_widget"]
