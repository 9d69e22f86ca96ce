"""``RunArtist``: draws a frame state (:mod:`.frames`) and redraws it in place.

One band per stage, left to right as an item travels: upstream (the source's
backlog, or a chain's hand-off), the queue's slots (slot 0, the next to start,
nearest the workers), the workers, the retry lane under the queue, and one
bin per outcome on the right. An autoscaled stage draws its pool: the boxes
of the workers it has at the frame, among faint ones up to its largest. A run
with a downstream has one more band under its stage: the downstream's queue
and servers, each request blue while its client waits and red once the
client has given up on it (work done for nobody), with the retries and the
goodput. Everything that moves is a scatter collection
per zone, made once: a frame only calls ``set_offsets`` and ``set_text`` and
draws those moving artists over a kept background (blitting), so a frame
costs the same however many frames are played.

Zones hold more items than they can draw (a queue of 5,000): each draws its
first ones (the queue's head, the longest waiting upstream, a bin's latest)
and says how many it holds; the counts are always exact.
"""

from __future__ import annotations

import dataclasses
import io
import math
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Rectangle
from PIL import Image

from .downstream import DownstreamFrame
from .frames import FrameState, StageFrame, Timeline

__all__ = ["BIN_COLOURS", "BLOCKED_COLOUR", "ORPHAN_COLOUR", "ZONE_COLOURS", "RunArtist"]

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
#: A downstream request whose client has given up on it (an orphan), and one it waits for.
ORPHAN_COLOUR = "#c44e52"
_LIVE_COLOUR = "#4c72b0"
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
_MAX_WORKERS = 64


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


def _boxes(ax: Any, positions: np.ndarray, size: float, face: str, edge: str, **more: Any) -> Any:
    """Square boxes at ``positions`` (a queue's slots, workers, servers)."""
    return ax.scatter(
        positions[:, 0],
        positions[:, 1],
        s=size,
        marker="s",
        facecolors=face,
        edgecolors=edge,
        linewidths=0.8,
        **more,
    )


def _box_positions(concurrency: int, y0: float) -> tuple[np.ndarray, float]:
    """Worker boxes in columns of up to 8 (more past 48 workers), right of the queue's
    head; and how much smaller than usual (a ratio of marker areas) their spacing
    wants the items drawn: 1 up to 48 workers."""
    shown = min(concurrency, _MAX_WORKERS)
    per_column = min(max(8, math.ceil(shown / 6)), max(shown, 1))
    step = min(0.42, 2.9 / per_column)
    index = np.arange(max(concurrency, 1))
    column = np.minimum(index, _MAX_WORKERS - 1) // per_column
    row = np.minimum(index, _MAX_WORKERS - 1) % per_column
    across = 0.42 if shown <= 48 else step  # past 48, columns as tight as rows
    positions = np.column_stack([9.7 + column * across, y0 + _BAND - 0.85 - row * step])
    return positions, min(1.0, step / 0.36) ** 2


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
            _boxes(ax, slots, marker_size * 1.6, "none", "#cfd8e8")
        ax.add_patch(
            Rectangle(
                (3.25, y0 + 0.15), 5.95, 0.75, facecolor="#fbefe6", edgecolor="none", zorder=0
            )
        )
        self.workers, shrink = _box_positions(stage.concurrency, y0)
        marker_size *= shrink  # a crowded pool draws smaller items
        shown = self.workers[:_MAX_WORKERS]
        self.pooled = stage.pool is not None
        if self.pooled:
            _boxes(ax, shown, marker_size * 2.6, "none", "#dddddd")
        else:
            _boxes(ax, shown, marker_size * 2.6, "#eef6ef", "#55a868")
        # An autoscaled pool: the boxes of the workers it has now, over the faint ones.
        self.pool = _boxes(
            ax, shown[:0], marker_size * 2.6, "#eef6ef", "#55a868", zorder=2, animated=True
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
        workers = "the pool" if self.pooled else f"workers ({stage.concurrency}){shade}"
        self.texts = {
            "upstream": ax.text(0.3, y0 + _BAND - 0.55, self.upstream_label, **text),
            "queue": ax.text(3.3, y0 + _BAND - 0.55, f"queue ({capacity})", **text),
            "running": ax.text(9.55, y0 + _BAND - 0.55, workers, **text),
            "retry": ax.text(3.3, y0 + 0.95, "retry lane (backoff)", **text),
        }
        # Shown only when a zone holds more than it draws (an empty text costs nothing).
        self.more = {
            "queue": ax.text(6.4, y0 + 0.95, "", fontsize=7, color="#4c72b0", animated=True),
            "upstream": ax.text(0.3, y0 + 0.8, "", fontsize=7, color="#777777", animated=True),
        }
        self.moving = [
            *([self.pool] if self.pooled else []),  # no pool, nothing to draw each frame
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

    def update(self, stage: StageFrame) -> None:
        top, y0 = self.top, self.y0
        upstream = _grid(len(stage.upstream), 2.9, top, _ROWS, _UPSTREAM_COLUMNS)
        queue = _grid(len(stage.queue), self.queue_head, top, self.queue_rows, _QUEUE_COLUMNS)
        busy = stage.workers >= 0
        running = self.workers[: len(busy)][busy[: len(self.workers)]][:_MAX_WORKERS]
        idle = self.workers[: len(busy)][~busy[: len(self.workers)]][:_MAX_WORKERS]
        self.blocked.set_offsets(idle[: stage.blocked])
        if stage.pool is not None:
            # The pool's boxes: every busy worker's, then the first idle ones (a worker
            # leaving finishes its item first, so the busy ones are all in the pool).
            self.pool.set_offsets(np.concatenate([running, idle])[: stage.pool])
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
            texts["running"].set_text(_workers_text(stage) + blocked)
            texts["retry"].set_text(f"retry lane {counts['retry']:,}")


def _workers_text(stage: StageFrame) -> str:
    """``"workers 3 / 4"`` busy; an autoscaled pool's size and last ask, ``"pool 14, asked
    16"`` (its busy workers are the boxes with an item: the label has no room for more)."""
    if stage.pool is None:
        return f"workers {stage.counts['running']} / {stage.concurrency}"
    asked = "" if stage.desired is None else f", asked {stage.desired}"
    return f"pool {stage.pool}{asked}"


class _DownstreamBand:
    """The artists of a run's downstream: its queue (the head nearest the servers), its
    servers, each request blue or red (an orphan), and its counters."""

    def __init__(
        self, ax: Any, downstream: DownstreamFrame, y0: float, marker_size: float, counters: bool
    ) -> None:
        self.counters = counters
        self.top = y0 + _BAND - 0.75
        self.queue_head = 9.0
        ax.text(0.3, y0 + _BAND - 0.55, "downstream", fontsize=8.5, weight="bold", va="bottom")
        ax.text(
            0.3,
            y0 + _BAND - 1.1,
            "blue: its client waits\nred: its client gave up\n(served for nobody)",
            fontsize=7,
            va="top",
            color="#555555",
        )
        self.servers, shrink = _box_positions(downstream.concurrency, y0)
        marker_size *= shrink
        _boxes(ax, self.servers[:_MAX_WORKERS], marker_size * 2.6, "#f4f4f4", "#777777")
        text = dict(fontsize=7.5, va="bottom", animated=counters)
        self.texts = {
            "queue": ax.text(3.3, y0 + _BAND - 0.55, "queue (FIFO)", **text),
            "servers": ax.text(
                9.55, y0 + _BAND - 0.55, f"servers ({downstream.concurrency})", **text
            ),
        }
        if counters:
            self.texts |= {
                name: ax.text(12.0, y0 + _BAND - 0.55 - row * 0.5, "", **text)
                for row, name in enumerate(("sent", "orphaned", "retries", "goodput"))
            }
        self.more = ax.text(6.4, y0 + 0.5, "", fontsize=7, color=_LIVE_COLOUR, animated=True)

        def scatter(colour: str) -> Any:
            return ax.scatter(
                [], [], s=marker_size, c=colour, linewidths=0, zorder=3, animated=True
            )

        self.items = {
            "live": scatter(_LIVE_COLOUR),
            "orphan": scatter(ORPHAN_COLOUR),
        }
        self.moving = [*self.items.values(), self.more]
        if counters:
            self.moving += list(self.texts.values())

    def update(self, downstream: DownstreamFrame) -> None:
        queue = _grid(len(downstream.queue), self.queue_head, self.top, _ROWS, _QUEUE_COLUMNS)
        orphan_queued = downstream.queue[: len(queue)]
        busy = downstream.servers >= 0
        servers = self.servers[: len(busy)][busy[: len(self.servers)]]
        orphan_serving = downstream.servers[busy][: len(servers)] == 1
        self.items["live"].set_offsets(
            np.concatenate([queue[~orphan_queued], servers[~orphan_serving]])
        )
        self.items["orphan"].set_offsets(
            np.concatenate([queue[orphan_queued], servers[orphan_serving]])
        )
        counts = downstream.counts
        hidden = counts["waiting"] - len(queue)
        self.more.set_text(f"+{hidden:,} more queued" if hidden > 0 else "")
        if self.counters:
            texts = self.texts
            texts["queue"].set_text(f"queue {counts['waiting']:,} ({counts['orphans']:,} orphans)")
            texts["servers"].set_text(f"servers {counts['in_service']} / {len(busy)}")
            texts["sent"].set_text(f"requests {counts['sent']:,}, served {counts['served']:,}")
            texts["orphaned"].set_text(f"served for nobody {counts['orphaned']:,}")
            texts["retries"].set_text(f"retries {counts['retries']:,}")
            texts["goodput"].set_text(f"goodput {downstream.goodput_per_s:,.1f}/s (10 s)")


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
        last = timeline.frame(len(timeline) - 1) if len(timeline) > 1 else first
        stage_frames = [_with_bins(a, b) for a, b in zip(first.stages, last.stages, strict=True)]
        stages = len(first.stages) + (first.downstream is not None)  # bands
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
        chain = len(first.stages) > 1
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
        self._downstream = None
        if first.downstream is not None:  # the lowest band: where the stage's calls go
            self._downstream = _DownstreamBand(ax, first.downstream, 0.0, marker_size, counters)
        self.figure.text(
            0.99, 0.985, timeline.note, fontsize=7.5, va="top", ha="right", color="#555555"
        )
        self._title = self.figure.text(0.01, 0.985, "", fontsize=9, va="top", animated=True)
        self._moving = [artist for band in self._bands for artist in band.moving]
        if self._downstream is not None:
            self._moving += self._downstream.moving
        self._background: Any = None
        self.state: FrameState | None = None
        self.update(first)

    def update(self, state: FrameState) -> None:
        """Move every zone's items to ``state`` (no artist is created or removed)."""
        for band, stage in zip(self._bands, state.stages, strict=True):
            band.update(stage)
        if self._downstream is not None and state.downstream is not None:
            self._downstream.update(state.downstream)
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
    return dataclasses.replace(first, bins={name: bins[name] for name in order})
