"""The site is built once per checkout: a later pytest run copies a whole build kept before.

``make test`` reads the site in two pytest runs (``test_site.py``, then
``test_site_browser.py`` in its next step); these check which kept build counts
as the same one, and that a build is kept whole or not at all.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.docs import site_builds
from tests.docs.site_builds import (
    KEPT,
    checkout_digest,
    copy_of_a_build,
    keep_build,
    one_build_at_a_time,
)


def _html(folder, page="the build"):
    (folder / "html").mkdir(parents=True)
    (folder / "html" / "index.html").write_text(page)
    return folder / "html"


def test_a_kept_build_of_the_same_checkout_is_copied_and_another_is_not(tmp_path):
    builds = tmp_path / "builds"
    keep_build(builds, "abc", _html(tmp_path / "built"), "what the build printed")
    found, log = copy_of_a_build(builds, "abc", tmp_path / "mine" / "html")
    assert found == tmp_path / "mine" / "html"  # a copy of its own: dropping the kept one
    assert (found / "index.html").read_text() == "the build"  # cannot break the reader
    assert log == "what the build printed"  # the no-warning check reads a kept build's too
    assert copy_of_a_build(builds, "other", tmp_path / "theirs" / "html") is None
    assert not (tmp_path / "theirs" / "html").exists()
    assert copy_of_a_build(tmp_path / "none yet", "abc", tmp_path / "x" / "html") is None


def test_a_build_is_kept_whole_once_and_the_oldest_are_dropped(tmp_path):
    builds = tmp_path / "builds"
    for n in range(KEPT + 2):
        keep_build(builds, f"d{n}", _html(tmp_path / f"b{n}", f"build {n}"), "")
        os.utime(builds / f"d{n}", (n, n))  # in order of use, whatever the clock's grain
    keep_build(builds, "d5", _html(tmp_path / "again", "a second build of d5"), "")
    kept = sorted(p.name for p in builds.iterdir())
    assert kept == [f"d{n}" for n in range(2, KEPT + 2)]  # no half-placed folder left
    assert (builds / "d5" / "html" / "index.html").read_text() == "build 5"


def test_the_digest_names_this_checkout_and_is_stable():
    first = checkout_digest()
    assert first is not None and len(first) == 64
    assert checkout_digest() == first


def test_a_second_build_waits_while_one_is_under_way(tmp_path):
    builds = tmp_path / "builds"
    take = (
        "import fcntl, sys; f = open(sys.argv[1], 'w')\n"
        "try:\n    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "except BlockingIOError:\n    sys.exit(3)"
    )
    with one_build_at_a_time(builds):  # another process cannot take it meanwhile
        held = subprocess.run([sys.executable, "-c", take, str(builds / ".lock")])
        assert held.returncode == 3
    after = subprocess.run([sys.executable, "-c", take, str(builds / ".lock")])
    assert after.returncode == 0  # and can once the block has ended


def _fake_sphinx(monkeypatch, tmp_path, code: str) -> Path:
    """Make the build a small script (``code``, given the output folder as ``out``) that
    counts its runs in the file returned; keep builds under ``tmp_path``."""
    runs = tmp_path / "runs"
    script = (
        "import pathlib, sys; out = pathlib.Path(sys.argv[1])\n"
        f"with open({str(runs)!r}, 'a') as f: f.write('run\\n')\n" + code
    )
    monkeypatch.setattr(site_builds, "SPHINX", ["-c", script])
    monkeypatch.setenv("PIPELINE_TEST_SITE_BUILDS", str(tmp_path / "builds"))
    return runs


def test_the_command_builds_and_keeps_the_site_once_per_checkout(monkeypatch, tmp_path, capsys):
    runs = _fake_sphinx(
        monkeypatch, tmp_path, "out.mkdir(parents=True); (out / 'index.html').write_text('x')"
    )
    assert site_builds.main() == 0
    assert site_builds.main() == 0  # kept: copied, not built again
    assert runs.read_text() == "run\n"
    found, _ = site_builds.site_of_this_checkout(lambda: tmp_path / "mine" / "html")
    assert (found / "index.html").read_text() == "x"
    assert capsys.readouterr().out.count("is kept in") == 2


def test_the_command_says_why_a_build_failed_and_keeps_nothing(monkeypatch, tmp_path, capsys):
    runs = _fake_sphinx(monkeypatch, tmp_path, "print('WARNING: a broken page', file=sys.stderr)"
                        "; sys.exit(3)")  # fmt: skip
    assert site_builds.main() == 1
    assert "failed (3):\nWARNING: a broken page" in capsys.readouterr().err
    assert runs.read_text() == "run\n"  # a failure is not a lost reply: not built again
    assert [p.name for p in (tmp_path / "builds").iterdir()] == [".lock"]


def test_the_digest_is_the_same_from_python_and_from_pytest_s_python3(tmp_path):
    # make test builds the site in a `python -m` run and reads it in pytest's runs, whose
    # interpreter is the same environment's `python3`, with other paths on sys.path
    code = "from tests.docs.site_builds import checkout_digest; print(checkout_digest())"
    digests = set()
    for name in ("python", "python3"):
        interpreter = Path(sys.prefix) / "bin" / name
        if not interpreter.exists():
            continue
        for where in (site_builds.REPO, tmp_path):  # with the checkout on sys.path, and not
            done = subprocess.run(
                [str(interpreter), "-c", code],
                cwd=where,
                env={**os.environ, "PYTHONPATH": str(site_builds.REPO)},
                capture_output=True,
                text=True,
                check=True,
            )
            digests.add(done.stdout.strip())
    assert len(digests) == 1 and None not in digests, digests
