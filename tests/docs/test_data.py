"""``data/``'s generated files are what their maker writes today, byte for byte."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from tests.docs.conftest import REPO
from tests.docs.figures import quoted
from tests.sim.workloads.telemetry.scraped import STEP_S, golden_scenario, write_golden_input


def test_the_shipped_traces_are_what_make_traces_writes(tmp_path):
    shutil.copy(REPO / "data" / "make_traces.py", tmp_path)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    subprocess.run(
        [sys.executable, "make_traces.py"], cwd=tmp_path, env=env, check=True, capture_output=True
    )
    written = sorted(path.name for path in tmp_path.glob("*.csv"))
    assert "handler_durations.csv" in written and "requests_per_minute.csv" in written
    for name in written:
        assert (tmp_path / name).read_bytes() == (REPO / "data" / name).read_bytes(), name


def test_the_shipped_prometheus_answer_is_what_its_maker_writes(tmp_path):
    written = write_golden_input(tmp_path / "orders_range.json")
    assert written.read_bytes() == (REPO / "data" / "orders_range.json").read_bytes()


def test_the_twin_guide_describes_the_prometheus_answer_s_truth():
    truth = golden_scenario()
    said = quoted(
        "docs/guide/twin.md",
        r"On (\w+) minutes of a known truth \(Poisson ([\d.]+)/s, log-normal service of mean"
        r" ([\d.]+) s and cv ([\d.]+), (\d+)% of attempts failing, (\d+) workers\) saved as"
        r" Prometheus answers it every (\d+) s",
    )
    words = ["zero", "ten", "twenty", "thirty", "forty", "fifty", "sixty"]
    assert words.index(said[1]) * 10 * 60 == truth.duration_s
    assert [float(said[i]) for i in (2, 3, 4)] == [
        truth.arrivals.rate,
        truth.service.mean,
        truth.service.cv,
    ]
    assert int(said[5]) / 100 == truth.failures.p
    assert (int(said[6]), float(said[7])) == (truth.config.concurrency, STEP_S)
