"""``RunArtist``: draws a frame state (:mod:`.frames`) and redraws it in place.

One band per stage, left to right as an item travels: upstream (the source's
backlog, or a chain's hand-off), the queue's slots (slot 0, the next to start,
nearest the workers), the workers, the retry lane under the queue, and one
bin per outcome on the right. Everything that moves is a scatter collection
per zone, made once: a frame only calls ``set_offsets`` and ``set_text`` and
draws those moving artists over a kept background (blitting), so a frame
costs the same however many frames are played.

Zones hold more items than they can draw (a queue of 5,000): each draws its
first ones (the queue's head, the longest waiting upstream, a bin's latest)
and says how many it holds; the counts are always exact.
"""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Rectangle
from PIL import Image

from .frames import FrameState, StageFrame, Timeline

__all__ = ["BIN_COLOURS", "BLOCKED_COLOUR", "ZONE_COLOURS", "RunArtist"]

#: Fill colour of an item in each zone.
ZONE_COLOURS = {
    "upstream": "#9a9a9a",
    "queue": "#4c72b0",
    "running": "#55a868",
    "retry": "#dd8452",
}
#: Fill colour of each bin; an outcome not listed is drawn in grey.
BIN_COLOURS = {
    "completed": "#4c72b0",
    "handed_on": "#4c72b0",
    "dead_lettered": "#c44e52",
    "shed": "#444444",
    "expired": "#8172b3",
    "unfinished": "#937860",
}
_OTHER_BIN = "#b0b0b0"
#: Fill of a worker's box while it is blocked after service (waiting to hand items on).
BLOCKED_COLOUR = "#f3d0d0"
_LABELS = {
    "completed": "completed",
    "handed_on": "handed on",
    "dead_lettered": "dead letters",
    "shed": "shed",
    "expired": "expired",
    "unfinished": "unfinished",
}

_CELL = 0.3  # spacing of item positions, data units
_BAND = 4.0  # height of one stage's band, data units
_WIDTH = 17.0  # the axes' width, data units
_ROWS = 8  # rows of the upstream and queue grids
_QUEUE_COLUMNS = 17
_UPSTREAM_COLUMNS = 9
_RETRY = (2, 17)  # rows, columns of the retry lane
_BIN = (1, 20)  # rows, columns of each bin's drawn items (its latest)
_BIN_CELL = 0.22
_MAX_BINS = 5  # bins per band with room of their own; more share the last row
_MAX_WORKERS = 48


def _grid(n: int, x_head: float, y_top: float, rows: int, columns: int) -> np.ndarray:
    """Positions of the first ``min(n, rows * columns)`` items of a zone, column by column
    from the head (``x_head``) leftwards, top to bottom."""
    shown = min(n, rows * columns)
    index = np.arange(shown)
    return np.column_stack([x_head - (index // rows) * _CELL, y_top - (index % rows) * _CELL])


def _row_grid(n: int, x_left: float, y_top: float, rows: int, columns: int) -> np.ndarray:
    """Positions of the first ``min(n, rows * columns)`` items, row by row from the left
    (a bin's tighter grid)."""
    shown = min(n, rows * columns)
    index = np.arange(shown)
    return np.column_stack(
        [x_left + (index % columns) * _BIN_CELL, y_top - (index // columns) * _BIN_CELL]
    )


class _Band:
    """The artists of one stage: static outlines, a scatter per zone, texts."""

    def __init__(
        self,
        ax: Any,
        stage: StageFrame,
        y0: float,
        marker_size: float,
        *,
        chain: bool,
        first: bool,
        counters: bool,
    ) -> None:
        self.counters = counters
        self.y0 = y0
        self.stage_name = stage.name
        self.upstream_label = "upstream" if first else "hand-off"
        top = y0 + _BAND - 0.75
        self.queue_rows = self._queue_rows(stage.capacity)
        self.queue_head = 9.0
        self.top = top
        if chain:
            ax.text(0.3, y0 + 0.3, f"stage {stage.name}", fontsize=9, weight="bold")
        # Static: the queue's slots (when they fit), the workers' boxes, the lanes.
        capacity = stage.capacity
        if capacity is not None and capacity <= self.queue_rows * _QUEUE_COLUMNS:
            slots = _grid(capacity, self.queue_head, top, self.queue_rows, _QUEUE_COLUMNS)
            ax.scatter(
                slots[:, 0],
                slots[:, 1],
                s=marker_size * 1.6,
                marker="s",
                facecolors="none",
                edgecolors="#cfd8e8",
                linewidths=0.8,
            )
        ax.add_patch(
            Rectangle(
                (3.25, y0 + 0.15), 5.95, 0.75, facecolor="#fbefe6", edgecolor="none", zorder=0
            )
        )
        self.workers = self._worker_positions(stage.concurrency, y0)
        shown = self.workers[:_MAX_WORKERS]
        ax.scatter(
            shown[:, 0],
            shown[:, 1],
            s=marker_size * 2.6,
            marker="s",
            facecolors="#eef6ef",
            edgecolors="#55a868",
            linewidths=0.8,
        )
        ax.add_patch(
            FancyArrowPatch(
                (9.9, y0 + 0.9),
                (8.0, y0 + 0.55),
                arrowstyle="->",
                connectionstyle="arc3,rad=-0.3",
                color="#dd8452",
                mutation_scale=8,
                lw=0.8,
            )
        )

        # Moving: one collection per zone and per bin.
        def scatter(colour: str, marker: str = "o") -> Any:
            return ax.scatter(
                [],
                [],
                s=marker_size,
                c=colour,
                marker=marker,
                linewidths=0,
                zorder=3,
                animated=True,
            )

        self.items = {zone: scatter(colour) for zone, colour in ZONE_COLOURS.items()}
        # A worker blocked after service (a chain's hand-off): its box, shaded.
        self.blocked = ax.scatter(
            [],
            [],
            s=marker_size * 2.6,
            marker="s",
            c=BLOCKED_COLOUR,
            edgecolors="#c44e52",
            linewidths=0.8,
            zorder=2,
            animated=True,
        )
        self.bins = {}
        self.bin_texts = {}
        for number, name in enumerate(stage.bins):
            row = min(number, _MAX_BINS - 1)
            y = y0 + _BAND - 0.45 - row * 0.72
            marker = "x" if name == "shed" else "o"
            collection = ax.scatter(
                [],
                [],
                s=marker_size * 0.45,
                c=BIN_COLOURS.get(name, _OTHER_BIN),
                marker=marker,
                linewidths=1.0 if marker == "x" else 0,
                zorder=3,
                animated=True,
            )
            self.bins[name] = (collection, 12.1, y - 0.1)
            label = _LABELS.get(name, name.replace("_", " "))
            self.bin_texts[name] = ax.text(
                12.0, y + 0.05, label, fontsize=7.5, va="bottom", animated=counters
            )
        # Labels with their counts move (a GIF shows them); without, the labels are
        # background and the counts are the widget's HTML beside the picture: a text
        # costs about as much to draw as every item together.
        capacity = "unbounded" if stage.capacity is None else f"maxsize {stage.capacity:,}"
        text = dict(fontsize=7.5, va="bottom", animated=counters)
        shade = "" if stage.last else ", red: blocked"
        self.texts = {
            "upstream": ax.text(0.3, y0 + _BAND - 0.55, self.upstream_label, **text),
            "queue": ax.text(3.3, y0 + _BAND - 0.55, f"queue ({capacity})", **text),
            "running": ax.text(
                9.55, y0 + _BAND - 0.55, f"workers ({stage.concurrency}){shade}", **text
            ),
            "retry": ax.text(3.3, y0 + 0.95, "retry lane (backoff)", **text),
        }
        # Shown only when a zone holds more than it draws (an empty text costs nothing).
        self.more = {
            "queue": ax.text(6.4, y0 + 0.95, "", fontsize=7, color="#4c72b0", animated=True),
            "upstream": ax.text(0.3, y0 + 0.8, "", fontsize=7, color="#777777", animated=True),
        }
        self.moving = [
            self.blocked,
            *self.items.values(),
            *(c for c, _, _ in self.bins.values()),
            *self.more.values(),
        ]
        if counters:
            self.moving += [*self.bin_texts.values(), *self.texts.values()]

    @staticmethod
    def _queue_rows(capacity: int | None) -> int:
        if capacity is None:
            return _ROWS
        return max(1, min(_ROWS, math.ceil(capacity / _QUEUE_COLUMNS)))

    @staticmethod
    def _worker_positions(concurrency: int, y0: float) -> np.ndarray:
        """Worker boxes in columns of up to 8, right of the queue's head."""
        shown = min(concurrency, _MAX_WORKERS)
        per_column = min(8, max(shown, 1))
        step = min(0.42, 2.9 / per_column)
        index = np.arange(max(concurrency, 1))
        column = np.minimum(index, _MAX_WORKERS - 1) // per_column
        row = np.minimum(index, _MAX_WORKERS - 1) % per_column
        return np.column_stack([9.7 + column * 0.42, y0 + _BAND - 0.85 - row * step])

    def update(self, stage: StageFrame) -> None:
        top, y0 = self.top, self.y0
        upstream = _grid(len(stage.upstream), 2.9, top, _ROWS, _UPSTREAM_COLUMNS)
        queue = _grid(len(stage.queue), self.queue_head, top, self.queue_rows, _QUEUE_COLUMNS)
        busy = stage.workers >= 0
        running = self.workers[: len(busy)][busy[: len(self.workers)]][:_MAX_WORKERS]
        idle = self.workers[: len(busy)][~busy[: len(self.workers)]][:_MAX_WORKERS]
        self.blocked.set_offsets(idle[: stage.blocked])
        retry = _grid(len(stage.retry), self.queue_head, y0 + 0.7, *_RETRY)
        for zone, offsets in (
            ("upstream", upstream),
            ("queue", queue),
            ("running", running),
            ("retry", retry),
        ):
            self.items[zone].set_offsets(offsets)
        counts = stage.counts
        hidden_q = counts["queue"] - len(queue)
        self.more["queue"].set_text(f"+{hidden_q:,} more queued" if hidden_q > 0 else "")
        hidden_u = counts["upstream"] - len(upstream)
        self.more["upstream"].set_text(f"+{hidden_u:,} more" if hidden_u > 0 else "")
        for name, (collection, x_left, y_top) in self.bins.items():
            total = counts.get(name, 0)
            drawn = min(total, _BIN[0] * _BIN[1])
            collection.set_offsets(_row_grid(drawn, x_left, y_top, *_BIN))
            if self.counters:
                label = _LABELS.get(name, name.replace("_", " "))
                self.bin_texts[name].set_text(f"{label} {total:,}")
        if self.counters:
            capacity = "unbounded" if stage.capacity is None else f"{stage.capacity:,}"
            texts = self.texts
            texts["upstream"].set_text(f"{self.upstream_label} {counts['upstream']:,}")
            texts["queue"].set_text(f"queue {counts['queue']:,} / {capacity}")
            blocked = f", {stage.blocked} blocked" if stage.blocked else ""
            texts["running"].set_text(f"workers {counts['running']} / {stage.concurrency}{blocked}")
            texts["retry"].set_text(f"retry lane {counts['retry']:,}")


class RunArtist:
    """A figure that shows one frame of a :class:`Timeline` and redraws itself in place.

    What never moves (the queue's slots, the workers' boxes, the lanes, the note)
    is drawn once and kept as a background; a frame restores it and draws only
    the moving artists over it (blitting), so a frame's cost is its items and
    counters, not the whole figure.

    Args:
        timeline: the frames to show (its last frame fixes which bins are drawn:
            bins only fill up).
        width_in: the figure's width, inches; the height follows the stages.
        dpi: dots per inch of the canvas.
        counters: draw each zone's count beside its label (a GIF's only counters);
            False leaves the labels still, for a widget that shows the counts
            beside the picture (a frame then draws in about half the time).

    Attributes:
        figure: the matplotlib :class:`~matplotlib.figure.Figure` (on an Agg canvas).
        state: the frame set last (:meth:`update`).
    """

    def __init__(
        self, timeline: Timeline, *, width_in: float = 9.0, dpi: int = 100, counters: bool = True
    ) -> None:
        self.timeline = timeline
        first = timeline.frame(0)
        stages = len(first.stages)
        last = timeline.frame(len(timeline) - 1) if len(timeline) > 1 else first
        stage_frames = [_with_bins(a, b) for a, b in zip(first.stages, last.stages, strict=True)]
        height_in = 0.45 + 1.75 * stages
        self.figure = Figure(figsize=(width_in, height_in), dpi=dpi, facecolor="white")
        FigureCanvasAgg(self.figure)
        ax = self.figure.add_axes((0.0, 0.0, 1.0, 1.0 - 0.4 / height_in))
        ax.set_xlim(0, _WIDTH)
        ax.set_ylim(0, _BAND * stages)
        ax.set_axis_off()
        # A marker a little smaller than its cell: cell width in points, squared.
        cell_pt = _CELL / _WIDTH * width_in * 72
        marker_size = (cell_pt * 0.72) ** 2
        chain = stages > 1
        self._bands = [
            _Band(
                ax,
                stage,
                _BAND * (stages - 1 - number),
                marker_size,
                chain=chain,
                first=number == 0,
                counters=counters,
            )
            for number, stage in enumerate(stage_frames)
        ]
        self.figure.text(
            0.99, 0.985, timeline.note, fontsize=7.5, va="top", ha="right", color="#555555"
        )
        self._title = self.figure.text(0.01, 0.985, "", fontsize=9, va="top", animated=True)
        self._moving = [artist for band in self._bands for artist in band.moving]
        self._background: Any = None
        self.state: FrameState | None = None
        self.update(first)

    def update(self, state: FrameState) -> None:
        """Move every zone's items to ``state`` (no artist is created or removed)."""
        for band, stage in zip(self._bands, state.stages, strict=True):
            band.update(stage)
        self._title.set_text(
            f"t = {state.time_s:,.2f} s    frame {state.index + 1:,} of {len(self.timeline):,}"
        )
        self.state = state

    def render(self) -> np.ndarray:
        """Draw the current frame on the canvas; its pixels, (height, width, 4) RGBA uint8.

        The array is a view of the canvas: copy it to keep it past the next render.
        """
        canvas = self.figure.canvas
        if self._background is None:
            canvas.draw()  # everything not animated: the background
            self._background = canvas.copy_from_bbox(self.figure.bbox)
        canvas.restore_region(self._background)
        for artist in self._moving:
            self.figure.draw_artist(artist)
        self.figure.draw_artist(self._title)
        return np.asarray(canvas.buffer_rgba())

    def png(self, *, compress_level: int = 1) -> bytes:
        """The current frame as PNG bytes (RGB, light compression: fast)."""
        pixels = self.render()
        height, width, _ = pixels.shape
        image = Image.frombuffer("RGBA", (width, height), pixels, "raw", "RGBA", 0, 1)
        buffer = io.BytesIO()
        image.convert("RGB").save(buffer, format="png", compress_level=compress_level)
        return buffer.getvalue()


def _with_bins(first: StageFrame, last: StageFrame) -> StageFrame:
    """``first`` with every bin that ``last`` has too, in drawing order."""
    bins = dict(first.bins)
    for name, ids in last.bins.items():
        bins.setdefault(name, ids[:0])
    order = list(last.bins) + [name for name in first.bins if name not in last.bins]
    return StageFrame(
        name=first.name,
        upstream=first.upstream,
        queue=first.queue,
        workers=first.workers,
        retry=first.retry,
        bins={name: bins[name] for name in order},
        counts=first.counts,
        capacity=first.capacity,
        last=first.last,
    )
