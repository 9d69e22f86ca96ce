"""The command line's JSON is pinned: `simulate`, `sweep`, `plan` and `calibrate` on fixed
seeds give, key for key, what they gave when these files were recorded.

A refactoring (the package layout, a faster path, a split module) must not move
a single number. A change that is meant to move one regenerates the file on
purpose and says why in its commit:

    .venv/bin/python -m tests.cli.test_cli_golden NAME   # rewrites tests/cli/golden/NAME.json

Only machine-dependent keys are left out: `wall_time_s` anywhere, and `out`,
the folder a command wrote to (`{tmp}` in a recorded command is a fresh one). Floats are
compared to 1e-12 relative, so that the last bit of a sum cannot fail a run on
another BLAS build, while any real change of a result still does.
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"
ROOT = Path(__file__).resolve().parents[2]
MACHINE_KEYS = {"wall_time_s", "out"}


def _cases():
    return sorted(p.stem for p in GOLDEN.glob("*.json"))


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in MACHINE_KEYS}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _differences(got, want, path="$"):
    """Every place where `got` differs from `want`, as 'path: got != want' lines."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = [f"{path}: key {k!r} missing" for k in want.keys() - got.keys()]
        out += [f"{path}: key {k!r} is new" for k in got.keys() - want.keys()]
        for k in want.keys() & got.keys():
            out += _differences(got[k], want[k], f"{path}.{k}")
        return out
    if isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            return [f"{path}: {len(got)} entries != {len(want)}"]
        return [
            d
            for i, (g, w) in enumerate(zip(got, want, strict=True))
            for d in _differences(g, w, f"{path}[{i}]")
        ]
    both_float = isinstance(want, float) and isinstance(got, float)
    if both_float and math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-300):
        return []
    return [] if got == want else [f"{path}: {got!r} != {want!r}"]


def _run(argv, tmp):
    # A fresh process, as a user runs it: warnings are printed, not raised (pytest's
    # filterwarnings=error would turn the plan's drain warning into exit status 2).
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", *(a.replace("{tmp}", str(tmp)) for a in argv)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# A sweep's and a plan's runs: 1.5 s of CPU each, in make test only (the other commands'
# golden files keep the fast tier's check of the pinned JSON).
LONG_CASES = {"sweep_grid", "plan_slos"}


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n in LONG_CASES else n for n in _cases()],
)
def test_json_is_unchanged(name, tmp_path):
    case = json.loads((GOLDEN / f"{name}.json").read_text())
    got = _strip(_run(case["argv"], tmp_path))
    differences = _differences(got, _strip(case["json"]))
    assert not differences, "\n".join(differences[:20])


def test_every_command_is_pinned():
    commands = {json.loads((GOLDEN / f"{n}.json").read_text())["argv"][0] for n in _cases()}
    assert commands == {"simulate", "sweep", "plan", "calibrate"}


def test_a_changed_number_is_caught():
    assert _differences({"a": 1.0, "b": [1, 2]}, {"a": 1.0 + 1e-9, "b": [1, 2]}) == [
        "$.a: 1.0 != 1.000000001"
    ]
    assert _differences({"a": 1}, {"a": 1, "c": 0}) == ["$: key 'c' missing"]


if __name__ == "__main__":
    # Regenerate cases on purpose: python -m tests.cli.test_cli_golden NAME [NAME ...]
    import tempfile

    for name in sys.argv[1:]:
        path = GOLDEN / f"{name}.json"
        case = json.loads(path.read_text())
        with tempfile.TemporaryDirectory() as tmp:
            case["json"] = _strip(_run(case["argv"], tmp))
        path.write_text(json.dumps(case, indent=1, sort_keys=True) + "\n")
        print(f"rewrote {path}")
