"""``ShowsWidget``: an object that a notebook displays as its root widget.

Every explorer and focused widget keeps its ipywidgets tree in ``widget``;
ending a cell with the object shows that tree, in JupyterLab's rich display
(``_ipython_display_``) and in front ends that ask for a MIME bundle. The
bundle also carries a short HTML note, which a front end that cannot run
widgets shows instead (the documentation site, a notebook viewer): what is
there and how to use it.
"""

from __future__ import annotations

import html
from typing import Any

__all__: list[str] = []


STATIC_NOTE = (
    "<p class='pipeline-widget-note'><em>An interactive widget is here: its sliders "
    "and plots run in JupyterLab. Open this notebook with <code>make lab</code> to "
    "use it.</em></p>"
)


class ShowsWidget:
    """Mixin: display ``self.widget`` (an ipywidget) in place of the object."""

    widget: Any

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self._repr_mimebundle_(), raw=True)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        # JupyterLab prefers the widget view; a static page takes the HTML note.
        return {**self.widget._repr_mimebundle_(**kwargs), "text/html": STATIC_NOTE}


def error_html(settings_text: str, doing: str, message: str) -> str:
    """The summary shown instead of raising: the settings, then why they cannot ``doing``."""
    return (
        f"<div><div style='color:#555'>{html.escape(settings_text)}</div>"
        f"<div style='color:#b00'><b>Cannot {doing} this setting:</b> "
        f"{html.escape(message)}</div></div>"
    )
