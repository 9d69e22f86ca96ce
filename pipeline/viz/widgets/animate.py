"""``animate(result)``: watch a simulated run move, frame by frame, with a ``Play`` control.

The widget is an ipywidgets ``Play`` linked (in the browser, ``jslink``) to a
frame slider; each frame is one event of the recorded run (see
:mod:`pipeline.viz.animation.frames`), drawn by
:class:`~pipeline.viz.animation.artist.RunArtist` into one kept figure and shown
as a PNG in an ``Image``, with the clock, the queue's depth and the counters
beside it and a note saying which part of the run the frames show. Frames are
rendered when shown (the last few kept), so a long run costs no more memory
than its window.

``.save(path)`` writes the same frames as a GIF (Pillow, through matplotlib's
``PillowWriter``), or as an MP4 where ffmpeg is installed (``FFMpegWriter``).
"""

from __future__ import annotations

import html
import math
import numbers
import os
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import ipywidgets as widgets
from matplotlib.animation import FFMpegWriter, PillowWriter
from PIL import Image

from ..animation.artist import RunArtist
from ..animation.frames import DEFAULT_MAX_FRAMES, FrameState, Timeline
from .shown import ShowsWidget

__all__ = ["ANIMATION_CLASS", "FRAME_CLASS", "SAVE_DPI", "AnimationWidget", "animate"]

#: DOM classes the browser test relies on: the widget's root and the frame's image.
ANIMATION_CLASS = "pipeline-animation"
FRAME_CLASS = "pipeline-animation-frame"

_CANVAS_SCALE = 1.5  # device pixels per displayed pixel of a frame
_KEPT_FRAMES = 32  # rendered PNGs kept, so that stepping back and forth redraws nothing
_GIF_COLOURS = 64  # a palette per GIF frame: one byte per pixel held while saving
SAVE_DPI = 110
"""Dots per inch of a saved movie unless asked otherwise: the picture's smallest text,
7 pt, is then about 11 px high (at 80 dpi a one-stage frame was 656 x 176 px, its
labels 8 px, too small to read)."""


class _GifFrames(PillowWriter):
    """``PillowWriter`` fed from a :class:`RunArtist`'s canvas (its moving artists are
    blitted, which ``savefig`` would leave out), each frame held as a 64-colour palette
    image: Pillow writes a GIF only at the end, so every frame waits in memory, at one
    byte a pixel instead of three."""

    def __init__(self, artist: RunArtist, fps: float) -> None:
        super().__init__(fps=fps)
        self._artist = artist

    def grab_frame(self, **savefig_kwargs: Any) -> None:
        rgb = Image.fromarray(self._artist.render()[..., :3])
        self._frames.append(rgb.quantize(colors=_GIF_COLOURS, method=Image.Quantize.FASTOCTREE))


class _Mp4Frames(FFMpegWriter):
    """``FFMpegWriter`` fed from a :class:`RunArtist`'s canvas, raw RGBA into ffmpeg's pipe."""

    def __init__(self, artist: RunArtist, fps: float) -> None:
        super().__init__(fps=fps)
        self._artist = artist

    def grab_frame(self, **savefig_kwargs: Any) -> None:
        self._proc.stdin.write(self._artist.render().tobytes())


class AnimationWidget(ShowsWidget):
    """A simulated run played frame by frame: ``Play`` + slider, the picture, the counters.

    Build it with :func:`animate`.

    Attributes:
        timeline: the frames (:class:`~pipeline.viz.animation.frames.Timeline`).
        artist: the figure that draws them (:class:`~pipeline.viz.animation.artist.RunArtist`).
        play: the ``ipywidgets.Play`` control (its ``value`` is the frame number).
        slider: the frame slider, linked to ``play`` in the browser (``link``, a ``jslink``).
        image: the ``Image`` showing the frame (DOM class ``pipeline-animation-frame``).
        counters: the ``HTML`` beside it: the clock, the depth, the counters.
        note: the ``HTML`` under it saying which part of the run is shown.
        widget: the root ``VBox`` (DOM class ``pipeline-animation``).
        timings_s: seconds each rendered frame took (state, drawing and PNG).
    """

    def __init__(
        self,
        result: Any,
        *,
        start_s: float = 0.0,
        end_s: float | None = None,
        max_frames: int = DEFAULT_MAX_FRAMES,
        every_s: float | None = None,
        interval_ms: int = 150,
        width_in: float = 8.2,
        dpi: int = 100,
    ) -> None:
        if isinstance(interval_ms, bool) or not isinstance(interval_ms, numbers.Integral):
            raise TypeError(f"interval_ms must be an int >= 10, got {interval_ms!r}")
        if interval_ms < 10:
            raise ValueError(f"interval_ms must be an int >= 10, got {interval_ms!r}")
        if (
            isinstance(width_in, bool)
            or not isinstance(width_in, numbers.Real)
            or not (math.isfinite(width_in) and 2 <= width_in <= 40)
        ):
            raise ValueError(f"width_in must be a number of inches from 2 to 40, got {width_in!r}")
        if isinstance(dpi, bool) or not isinstance(dpi, numbers.Integral) or not 10 <= dpi <= 600:
            raise ValueError(f"dpi must be an int from 10 to 600, got {dpi!r}")
        self.timeline = Timeline(
            result, start_s=start_s, end_s=end_s, max_frames=max_frames, every_s=every_s
        )
        # The canvas denser than displayed, shown at its nominal size: sharp on a retina
        # screen at 1.5x (2x would double the PNG's encoding, the frame's largest cost).
        self.artist = RunArtist(
            self.timeline, width_in=width_in, dpi=round(dpi * _CANVAS_SCALE), counters=False
        )
        self._width_in = width_in
        self.timings_s: list[float] = []
        self._kept: OrderedDict[int, tuple[bytes, str]] = OrderedDict()
        last = len(self.timeline) - 1
        self.play = widgets.Play(
            value=0, min=0, max=last, step=1, interval=int(interval_ms), description="Play"
        )
        self.slider = widgets.IntSlider(
            value=0,
            min=0,
            max=last,
            step=1,
            description="frame",
            readout=True,
            style={"description_width": "initial"},
            layout={"width": "60%"},
        )
        # Linked in the browser: a played step moves the slider with no round trip.
        self.link = widgets.jslink((self.play, "value"), (self.slider, "value"))
        width, height = (round(v * dpi) for v in self.artist.figure.get_size_inches())
        self.image = widgets.Image(format="png", width=str(width), height=str(height))
        self.image.add_class(FRAME_CLASS)
        self.counters = widgets.HTML(layout={"min_width": "150px"})
        self.note = widgets.HTML(
            f"<span style='color:#555'>{html.escape(self.timeline.note)}</span>"
        )
        self.widget = widgets.VBox(
            [
                widgets.HBox([self.play, self.slider]),
                widgets.HBox([self.image, self.counters]),
                self.note,
            ]
        )
        # Not the focused widgets' class: it has no controls to re-run and no summary.
        self.widget.add_class(ANIMATION_CLASS)
        # The slider, not the Play: a drag and a played step both end up here (jslink).
        self.slider.observe(self._on_frame, names="value")
        self.play.observe(self._on_frame, names="value")
        self.show(0)

    def __len__(self) -> int:
        return len(self.timeline)

    def __repr__(self) -> str:
        return (
            f"<AnimationWidget frames={len(self)} frame={self.slider.value} ({self.timeline.note})>"
        )

    @property
    def state(self) -> FrameState:
        """The frame shown now."""
        state = self.artist.state
        assert state is not None  # drawn in __init__
        return state

    def _on_frame(self, change: dict[str, Any]) -> None:
        index = change["new"]
        if index != self.state.index or not self.image.value:
            self.show(index)

    def show(self, index: int) -> float:
        """Draw frame ``index`` and show it (the slider and ``Play`` follow).

        Returns:
            Seconds it took (0 when the frame was kept from before).

        Raises:
            TypeError, IndexError: as :meth:`Timeline.frame` does.
        """
        began = time.perf_counter()
        kept = self._kept.pop(index, None) if isinstance(index, int) else None
        if kept is None:
            state = self.timeline.frame(index)
            self.artist.update(state)
            kept = (self.artist.png(), _counters_html(state, self.timeline))
        else:
            self.artist.update(self.timeline.frame(index))
        self._kept[index] = kept
        while len(self._kept) > _KEPT_FRAMES:
            self._kept.popitem(last=False)
        self.image.value, self.counters.value = kept
        for control in (self.slider, self.play):
            if control.value != index:
                control.value = index
        elapsed = time.perf_counter() - began
        self.timings_s.append(elapsed)
        return elapsed

    def save(self, path: str | os.PathLike[str], *, fps: float = 8.0, dpi: int = SAVE_DPI) -> Path:
        """Write every frame to ``path``: a ``.gif`` (Pillow), or an ``.mp4`` (ffmpeg).

        The file is written beside ``path`` under a temporary name and moved into
        place once complete: a failed save leaves nothing half-written. Saving
        again replaces the file. The frames are drawn on a canvas of their own,
        so the widget goes on showing its frame. A GIF holds its frames in
        memory until written (one byte a pixel: 400 frames of one stage at
        the default dpi, about 90 MB); an MP4 streams them to ffmpeg.

        Args:
            path: where to write; its suffix (``.gif`` or ``.mp4``) picks the format.
            fps: frames per second of the movie.
            dpi: dots per inch of its frames (the widget's figure, re-rendered);
                the default, :data:`SAVE_DPI`, draws the smallest text 10 px high.

        Returns:
            The path written.

        Raises:
            ValueError: another suffix, or ``fps``/``dpi`` not a positive number.
            FileNotFoundError: the folder does not exist.
            NotADirectoryError: the folder is a file.
            RuntimeError: an ``.mp4`` without ffmpeg on PATH.
            OSError: the file cannot be written (the message names it).
        """
        target = Path(os.fspath(path))
        suffix = target.suffix.lower()
        if suffix not in (".gif", ".mp4"):
            raise ValueError(f"path must end in .gif or .mp4, got {str(target)!r}")
        if (
            isinstance(fps, bool)
            or not isinstance(fps, numbers.Real)
            or not (math.isfinite(fps) and fps > 0)
        ):
            raise ValueError(f"fps must be a number of frames per second > 0, got {fps!r}")
        if isinstance(dpi, bool) or not isinstance(dpi, numbers.Integral) or dpi < 10:
            raise ValueError(f"dpi must be an int >= 10, got {dpi!r}")
        folder = target.parent
        if not folder.exists():
            raise FileNotFoundError(f"cannot save the animation to {target}: no folder {folder}")
        if not folder.is_dir():
            raise NotADirectoryError(
                f"cannot save the animation to {target}: {folder} is not a folder"
            )
        if suffix == ".mp4" and not FFMpegWriter.isAvailable():
            raise RuntimeError(
                f"cannot save {target}: an MP4 needs ffmpeg on PATH (apt-get install ffmpeg); "
                "a .gif needs nothing more"
            )
        # A canvas of its own at the movie's dpi: the widget's stays on its frame.
        artist = RunArtist(self.timeline, width_in=self._width_in, dpi=dpi)
        writer = (_GifFrames if suffix == ".gif" else _Mp4Frames)(artist, fps)
        partial = target.with_name(f".{target.stem}.{os.getpid()}.partial{suffix}")
        try:
            partial.open("wb").close()  # an unwritable place fails now, before any frame
            with writer.saving(artist.figure, str(partial), dpi):
                for index in range(len(self.timeline)):
                    artist.update(self.timeline.frame(index))
                    writer.grab_frame()
            os.replace(partial, target)
        except OSError as error:
            raise type(error)(
                f"cannot save the animation to {target}: {error.strerror or error}"
            ) from None
        finally:
            partial.unlink(missing_ok=True)
        return target


def _counters_html(state: FrameState, timeline: Timeline) -> str:
    """The clock, then each stage's depth and counters, as a small table."""
    rows = [
        f"<b>t = {state.time_s:,.2f} s</b>",
        f"<span style='color:#777'>of {timeline.run_end_s:,.1f} s</span>",
    ]
    for stage in state.stages:
        counts = stage.counts
        capacity = "∞" if stage.capacity is None else f"{stage.capacity:,}"
        if len(state.stages) > 1:
            rows.append(f"<b>{html.escape(stage.name)}</b>")
        rows.append(f"queue depth {counts['queue']:,} / {capacity}")
        blocked = f", {stage.blocked} blocked" if stage.blocked else ""
        pool = stage.concurrency if stage.pool is None else stage.pool
        rows.append(f"workers busy {counts['running']} / {pool}{blocked}")
        if stage.pool is not None:
            asked = "none yet" if stage.desired is None else f"{stage.desired}"
            rows.append(f"pool {stage.pool}, last sync asked {asked}")
        rows.append(f"retry lane {counts['retry']:,}")
        rows.append(
            f"{'upstream' if stage is state.stages[0] else 'hand-off'} {counts['upstream']:,}"
        )
        for name, ids in stage.bins.items():
            del ids
            rows.append(f"{html.escape(name.replace('_', ' '))} {counts[name]:,}")
    if state.downstream is not None:
        down = state.downstream
        counts = down.counts
        rows += [
            "<b>downstream</b>",
            f"queue {counts['waiting']:,}, servers busy {counts['in_service']} / "
            f"{down.concurrency}",
            f"<span style='color:#c44e52'>orphans now {counts['orphans']:,}</span>",
            f"requests {counts['sent']:,}, served {counts['served']:,}",
            f"<span style='color:#c44e52'>served for nobody {counts['orphaned']:,}</span>",
            f"retries {counts['retries']:,}",
            f"goodput {down.goodput_per_s:,.1f}/s (last 10 s)",
        ]
    body = "<br>".join(rows)
    return f"<div class='pipeline-animation-counters' style='font-size:12px'>{body}</div>"


def animate(
    result: Any,
    *,
    start_s: float = 0.0,
    end_s: float | None = None,
    max_frames: int = DEFAULT_MAX_FRAMES,
    every_s: float | None = None,
    interval_ms: int = 150,
) -> AnimationWidget:
    """Watch a simulated run move: items arrive, queue, run, retry, and land in their bins.

    One frame per event of the recorded run (arrivals included): an item never
    jumps over a zone between two frames. A long run is thinned to a window:
    the event times in ``[start_s, end_s]``, at most ``max_frames`` of them,
    the first ones; the widget says which part it shows ("showing 0-60 s of
    3,600 s"). A window, not every k-th event, because skipping events would
    make items teleport; pick the stretch worth watching with ``start_s``.
    A window that runs to the run's end (``end_s`` not given) but has more
    events than frames ends with one frame at the run's end, so the last frame
    always holds the run's outcome ("..., then the run's end"). A storm or a burst
    lasts minutes: ``every_s`` shows one frame every so many seconds instead, each
    the exact state at its instant (items then move several zones at a time).

    What the run has besides its items is drawn from its own records: an
    autoscaled pool (its workers at each frame among faint boxes up to its
    largest, and what the last sync asked for), and a downstream in a band of its
    own (its queue and servers, each request red once its client has given up
    on it, and the requests served for nobody, the retries and the goodput).

    Args:
        result: what :func:`~pipeline.simulate` returned (one stage or a chain).
        start_s: the window's start, seconds of virtual time.
        end_s: the window's end, seconds (default: the run's end).
        max_frames: at most this many frames (default 400).
        every_s: None (a frame per event), or seconds between frames.
        interval_ms: milliseconds between frames while playing.

    Returns:
        An :class:`AnimationWidget`: end a cell with it to show it; ``.save(path)``
        writes a GIF (or an MP4 where ffmpeg is installed).

    Raises:
        TypeError, ValueError: a bad result, window, ``max_frames`` or ``interval_ms``
            (the message names it).

    Example::

        result = simulate(Scenario(arrivals=Poisson(rate=3.5), service=Exponential(mean=1.0),
                                   config=PipelineConfig(concurrency=3, queue_maxsize=10),
                                   n_items=200, seed=1))
        player = animate(result)
        player          # in a notebook: press Play
        player.save("run.gif")
    """
    return AnimationWidget(
        result,
        start_s=start_s,
        end_s=end_s,
        max_frames=max_frames,
        every_s=every_s,
        interval_ms=interval_ms,
    )
