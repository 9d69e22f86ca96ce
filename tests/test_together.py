"""``python -m tests.together``: make test's suite and browser step at the same time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.together import _stop, run


def _together(*commands: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tests.together", *commands], capture_output=True, text=True
    )


def test_each_output_is_whole_the_first_as_it_runs_the_others_after_it():
    done = _together("echo first-a; sleep 0.3; echo first-b", "echo other-a; echo other-b")
    assert done.returncode == 0
    # the other ended first, yet prints after the first command, under its command, whole
    assert done.stdout == "first-a\nfirst-b\n\necho other-a; echo other-b\nother-a\nother-b\n"


@pytest.mark.parametrize(
    ("first", "other", "status"),
    [("true", "true", 0), ("exit 3", "true", 3), ("true", "exit 5", 5), ("exit 3", "exit 5", 3)],
)
def test_the_status_is_the_first_failure_s_the_first_command_s_before_the_others(
    first, other, status
):
    assert _together(first, other).returncode == status


def test_no_command_is_refused_in_one_line():
    done = _together()
    assert done.returncode == 2
    assert done.stderr == "python -m tests.together: no command given\n"


def test_stopping_a_command_stops_what_its_shell_started():
    # a shell that started two children of its own: both go when it is stopped
    process = subprocess.Popen("sleep 60 & sleep 60; wait", shell=True, start_new_session=True)
    try:
        _stop(process)
        assert process.returncode is not None
        with pytest.raises(ProcessLookupError):  # no process of its group is left, once the
            for _ in range(200):  # stopped children are reaped (by init, their shell gone)
                os.killpg(process.pid, 0)
                time.sleep(0.05)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, 9)
    _stop(process)  # a second stop of an ended command does nothing


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_the_others_are_stopped_when_the_runner_is_interrupted_or_terminated(tmp_path, signum):
    started, marker = tmp_path / "started", tmp_path / "the other still ran"
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.together", f"touch '{started}'; sleep 60",
         f"sleep 2; touch '{marker}'"],
        # as from a terminal: a test worker's children inherit its ignored SIGINT
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        for _ in range(600):  # the first command runs: the other was started before it
            if started.exists():
                break
            time.sleep(0.05)
        assert started.exists()
        child.send_signal(signum)
        assert child.wait(timeout=30) != 0
        time.sleep(2.5)  # past the moment the other would have made its file
        assert not marker.exists()
    finally:
        if child.poll() is None:
            child.kill()


def test_run_is_the_module_s_entry():
    assert run(["true"]) == 0
