"""The notebooks' own widgets: one knob-sized question of one notebook each.

They are teaching material built on :mod:`pipeline.viz`, kept apart from the general
figures and widgets there; nothing in the library imports them.
"""

from .._extras import require

require("pipeline.lessons", "viz")  # the lessons draw with matplotlib and ipywidgets
