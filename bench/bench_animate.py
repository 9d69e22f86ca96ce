"""Benchmark: CPU time per frame of ``pipeline.viz.animate``, with a few hundred items in view.

An overloaded stage with retries (12 workers, a queue of 200, 30% of attempts
failing with a backoff, arrivals above capacity) keeps a few hundred items on
screen: a full queue, a backlog upstream, the workers, the retry lane and the
bins. Frames are timed in a window where the queue is full, as the widget
plays them, in separate parts:

- *state*: :meth:`Timeline.frame` (numpy: where every item is);
- *update*: :meth:`RunArtist.update` (``set_offsets`` and ``set_text``);
- *draw*: :meth:`RunArtist.render`, matplotlib's Agg canvas (the background
  restored, the moving artists drawn over it);
- *png*: encoding the canvas (what the widget sends to the browser);

*frame* is state + update + draw (the issue's budget: about 50 ms), *shown*
adds the PNG. Times are CPU time of this process (``time.process_time()``,
user + sys), medians over the frames. The canvas is the widget's (8.2 inches
at 150 dpi, shown at 100 dpi; labels still, the counts in the HTML beside it);
``--counters`` draws the counts in the figure as a saved GIF does, ``--dpi``
another density. For comparison, a full redraw of the same figure
(``canvas.draw()`` of every artist, no kept background) is timed on every
fourth frame. Set ``OPENBLAS_NUM_THREADS=1`` when timing.

Usage: ``python bench/bench_animate.py [--frames 120]`` from the repository root.
"""

from __future__ import annotations

import argparse
import platform
import shlex
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from pipeline import Backoff, PipelineConfig
from pipeline.sim import (
    DrainTimeoutWarning,
    Exponential,
    IndependentFailures,
    Poisson,
    Scenario,
    simulate,
)
from pipeline.viz.animation.artist import RunArtist
from pipeline.viz.animation.frames import Timeline

TARGET_MS = 50
ROOT = Path(__file__).resolve().parents[1]


def scenario(n_items: int) -> Scenario:
    config = PipelineConfig(
        concurrency=12,
        queue_maxsize=200,
        max_attempts=3,
        backoff=Backoff(base_s=3.0),
        drain_timeout_s=None,
    )
    return Scenario(
        arrivals=Poisson(rate=14.0),
        service=Exponential(mean=1.0),
        config=config,
        n_items=n_items,
        seed=1,
        failures=IndependentFailures(p=0.3),
    )


def cpu_ms(function) -> tuple[float, object]:
    began = time.process_time()
    value = function()
    return (time.process_time() - began) * 1e3, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=120, help="frames timed (default 120)")
    parser.add_argument("--dpi", type=int, default=150, help="canvas dpi (default 150)")
    parser.add_argument("--counters", action="store_true", help="counts in the figure (a GIF)")
    parser.add_argument("--items", type=int, default=3000, help="items in the run (default 3000)")
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DrainTimeoutWarning)
        result = simulate(scenario(args.items))
    # A window late enough that the queue is full and the backlog long.
    start_s = 0.5 * result.summary["sim_time_s"]
    timeline = Timeline(result, start_s=start_s, max_frames=args.frames)
    artist = RunArtist(timeline, width_in=8.2, dpi=args.dpi, counters=args.counters)
    artist.render()  # the background, once
    parts: dict[str, list[float]] = {"state": [], "update": [], "draw": [], "png": []}
    full: list[float] = []
    in_view: list[int] = []
    for index in range(len(timeline)):
        ms, state = cpu_ms(lambda i=index: timeline.frame(i))
        parts["state"].append(ms)
        parts["update"].append(cpu_ms(lambda s=state: artist.update(s))[0])
        parts["draw"].append(cpu_ms(artist.render)[0])
        parts["png"].append(cpu_ms(artist.png)[0] - parts["draw"][-1])
        stage = state.stages[0]
        drawn = len(stage.upstream[:72]) + len(stage.queue[:136]) + int((stage.workers >= 0).sum())
        drawn += len(stage.retry[:34]) + sum(min(stage.counts[name], 20) for name in stage.bins)
        in_view.append(drawn)
    # The same frames redrawn from scratch (every artist, no kept background).
    for artist_ in [*artist._moving, artist._title]:
        artist_.set_animated(False)
    for index in range(0, len(timeline), 4):
        artist.update(timeline.frame(index))
        full.append(cpu_ms(artist.figure.canvas.draw)[0])
    median = {name: statistics.median(values) for name, values in parts.items()}
    frame = [
        a + b + c for a, b, c in zip(parts["state"], parts["update"], parts["draw"], strict=True)
    ]
    shown = [f + p for f, p in zip(frame, parts["png"], strict=True)]
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    with open("/proc/loadavg") as load:
        loadavg = load.read().split()[0]
    print(f"command: {shlex.join([sys.executable.rsplit('/', 1)[-1], *sys.argv])}")
    print(
        f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  commit: {commit}  "
        f"python {platform.python_version()}  load average {loadavg}"
    )
    print(f"run: {args.items:,} items, {timeline.note}")
    print(f"items in view: median {statistics.median(in_view):.0f}, max {max(in_view)}")
    print("| part | median ms CPU | p90 ms |")
    print("|---|---:|---:|")
    for name, values in [
        *parts.items(),
        ("frame (state+update+draw)", frame),
        ("shown (frame+png)", shown),
        ("full redraw, no blitting", full),
    ]:
        ordered = sorted(values)
        p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
        print(f"| {name} | {statistics.median(values):.1f} | {p90:.1f} |")
    ratio = statistics.median(full) / median["draw"]
    print(f"blitted draw is {ratio:.1f}x cheaper than a full redraw")
    verdict = "meets" if statistics.median(frame) <= TARGET_MS else "misses"
    print(f"frame median {statistics.median(frame):.1f} ms CPU {verdict} the {TARGET_MS} ms budget")
    return 0


if __name__ == "__main__":
    sys.exit(main())
