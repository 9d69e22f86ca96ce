"""Fixtures of the command-line tests: main() in this process, scenario files, bad input."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def scenario_file(tmp_path) -> Callable[..., str]:
    """``scenario_file(text, name="scenario.toml")``: ``text`` dedented into tmp_path; its path."""

    def write(text: str, name: str = "scenario.toml") -> str:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return str(path)

    return write


@pytest.fixture
def bad_files(tmp_path) -> Path:
    """A folder of bad input for every command; the tests run in it by name."""
    # simulate: a trace out of order, an unknown key, too many items, a trace file that is bad
    (tmp_path / "bad.csv").write_text("arrival_s,service_s\n1,1\n0.5,1\n")
    (tmp_path / "bad.toml").write_text("colour = 1\n")
    (tmp_path / "big.toml").write_text(
        'arrivals = "poisson:rate=1"\nservice = "constant:value=1"\nitems = 100000000000\n'
    )
    (tmp_path / "trace.toml").write_text('trace = "bad.csv"\narrivals = "poisson:rate=1"\n')
    # plan: a search and SLOs of the wrong type, an empty axis
    head = 'arrivals = "poisson:rate=3.2"\nservice = "exponential:mean=1.0"\nitems = 100\n'
    (tmp_path / "badsearch.toml").write_text(head + 'search = "concurrency=1..4"\nslo = "x<=1"\n')
    (tmp_path / "badslo.toml").write_text(head + 'slo = [1, 2]\nsearch = {concurrency = "1..4"}\n')
    (tmp_path / "emptyaxis.toml").write_text(
        head + 'slo = ["wait_mean_s<=1"]\nsearch = {concurrency = []}\n'
    )
    # sweep: a file where a folder belongs, grids that are wrong in four ways
    (tmp_path / "a_file").write_text("not a directory\n")
    head = 'arrivals = "poisson:rate=1"\nservice = "constant:value=1"\nitems = 5\n'
    (tmp_path / "grid_list.toml").write_text(head + "[grid]\nconcurrency = [1, true]\n")
    (tmp_path / "grid_empty.toml").write_text(head + "[grid]\nconcurrency = []\n")
    (tmp_path / "grid_scalar.toml").write_text("grid = 4\n" + head)
    (tmp_path / "grid_bad.toml").write_text(head + "[grid]\nworkers = [1, 2]\n")
    return tmp_path
