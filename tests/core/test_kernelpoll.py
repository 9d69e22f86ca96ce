"""pipeline.kernelpoll: a kernel's reply already in the socket is read, whatever its wake-up did.

Real sockets on 127.0.0.1: a ROUTER plays the kernel's shell and answers a
jupyter_client channel (asyncio, as nbclient's in the site's build and in grading;
blocking, as nbval's). Then each place that runs the project's notebooks is shown
to wait with it: every pytest run (nbval's notebooks included), the grading
runner, and the docs build.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from queue import Empty

import pytest
import zmq
import zmq.asyncio
from jupyter_client.channels import AsyncZMQSocketChannel, ZMQSocketChannel
from jupyter_client.session import Session

from pipeline import kernelpoll

REPO = Path(__file__).resolve().parents[2]

# A hang guard, not a speed check: the patched wait returns within a slice; the plain one
# would sleep out the hour it was given.
GUARD_S = 60


class Shell:
    """A channel (the build's side) and a ROUTER peer (the kernel's side), connected."""

    def __init__(self, context=zmq.asyncio.Context, channel=AsyncZMQSocketChannel) -> None:
        self.context = context()
        self.socket = self.context.socket(zmq.DEALER)
        port = self.socket.bind_to_random_port("tcp://127.0.0.1")
        self.peer = zmq.Context.instance().socket(zmq.ROUTER)
        self.peer.connect(f"tcp://127.0.0.1:{port}")
        self.session = Session()
        self.channel = channel(self.socket, self.session)
        self.identity = b""

    async def connect(self) -> None:
        await self.socket.send_multipart([b"hello"])
        self.identity, _ = self.peer.recv_multipart()

    def reply(self) -> None:
        self.session.send(self.peer, "execute_reply", {"status": "ok"}, ident=self.identity)

    def lose_the_wake_up(self) -> None:
        # Reading the socket's events outside the event loop processes its commands and
        # consumes the edge its file descriptor signalled: what a send on the same socket
        # can do. The loop's poll is then never woken for the message already there.
        # Asked until the message is there: the read that finds it is the one that took
        # its edge, however late a loaded machine delivers it.
        events = zmq.Socket.shadow(self.socket.underlying)
        deadline = time.monotonic() + GUARD_S
        while not events.get(zmq.EVENTS) & zmq.POLLIN and time.monotonic() < deadline:
            time.sleep(0.005)

    def close(self) -> None:
        self.peer.close(linger=0)
        self.socket.close(linger=0)
        self.context.term()


@pytest.fixture
def shell():
    assert kernelpoll.installed()  # by the repository's conftest.py, as for every pytest run
    made = Shell()
    yield made
    made.close()


@pytest.fixture
def shipped():
    """The channels as jupyter_client ships them, for one test; then as they were."""
    was = kernelpoll.installed()
    kernelpoll.uninstall()
    try:
        yield
    finally:
        if was:
            kernelpoll.install()


async def _stranded_reply(shell: Shell, timeout: float | None) -> dict:
    await shell.connect()
    waiting = asyncio.ensure_future(shell.channel.get_msg(timeout=timeout))
    await asyncio.sleep(0.2)  # the poll is registered and asleep
    shell.reply()
    shell.lose_the_wake_up()
    return await asyncio.wait_for(waiting, GUARD_S)


@pytest.mark.asyncio
@pytest.mark.parametrize("timeout", [3600.0, None])
async def test_a_reply_whose_wake_up_was_lost_is_read(shell: Shell, timeout) -> None:
    msg = await _stranded_reply(shell, timeout)
    assert msg["msg_type"] == "execute_reply" and msg["content"] == {"status": "ok"}


@pytest.mark.asyncio
async def test_the_plain_channel_sleeps_through_it(shipped) -> None:
    # Why the patch exists: the channel as shipped waits out its timeout for a reply it holds.
    # (If jupyter_client or pyzmq fixes this, this test fails and the patch can go.)
    shell = Shell()
    try:
        await shell.connect()
        waiting = asyncio.ensure_future(shell.channel.get_msg(timeout=3600))
        await asyncio.sleep(0.2)
        shell.reply()
        shell.lose_the_wake_up()
        done, _ = await asyncio.wait({waiting}, timeout=3 * kernelpoll.SLICE_S)
        assert not done, "the shipped channel read the reply: pipeline/kernelpoll.py may go"
        waiting.cancel()
    finally:
        shell.close()


@pytest.mark.asyncio
async def test_the_callers_timeout_still_holds(shell: Shell) -> None:
    await shell.connect()
    for timeout in (0, 0.3, 1.7):
        started = time.monotonic()
        with pytest.raises(Empty):
            await asyncio.wait_for(shell.channel.get_msg(timeout=timeout), GUARD_S)
        assert time.monotonic() - started >= timeout  # never gives up before it was told
    shell.reply()  # a reply that is there, its wake-up lost, comes back on an immediate read
    shell.lose_the_wake_up()
    assert (await shell.channel.get_msg(timeout=0))["msg_type"] == "execute_reply"


@pytest.mark.asyncio
async def test_a_reply_sent_later_comes_without_a_limit(shell: Shell) -> None:
    await shell.connect()
    waiting = asyncio.ensure_future(shell.channel.get_msg(timeout=None))
    await asyncio.sleep(2.5 * kernelpoll.SLICE_S)  # several slices pass with nothing
    assert not waiting.done()
    shell.reply()
    assert (await asyncio.wait_for(waiting, GUARD_S))["msg_type"] == "execute_reply"


class BlockingShell(Shell):
    """The same, with the blocking channel nbval's kernel client reads."""

    def __init__(self) -> None:
        super().__init__(zmq.Context, ZMQSocketChannel)
        self.socket.send_multipart([b"hello"])
        self.identity, _ = self.peer.recv_multipart()


def test_the_blocking_channel_waits_in_slices_and_keeps_its_timeout() -> None:
    shell = BlockingShell()
    try:
        for timeout in (0, 0.3, 1.7):
            started = time.monotonic()
            with pytest.raises(Empty):
                shell.channel.get_msg(timeout=timeout)
            assert time.monotonic() - started >= timeout
        shell.reply()
        shell.lose_the_wake_up()
        assert shell.channel.get_msg(timeout=GUARD_S)["msg_type"] == "execute_reply"
        shell.reply()
        assert shell.channel.get_msg(timeout=None)["msg_type"] == "execute_reply"
    finally:
        shell.close()


# Each place the project runs notebooks waits with the sliced channels.


def test_every_pytest_run_waits_in_slices() -> None:
    # The repository's conftest.py installs them in every pytest process of this checkout:
    # the one that runs the notebooks under nbval (pyproject's testpaths) as this one.
    assert kernelpoll.installed()
    assert AsyncZMQSocketChannel.get_msg is kernelpoll.get_msg
    assert ZMQSocketChannel.get_msg is kernelpoll.get_msg_blocking


@pytest.mark.slow  # runs pytest on a notebook: 2.5 s of CPU
def test_a_pytest_run_of_one_notebook_waits_in_slices(tmp_path: Path) -> None:
    # `pytest notebooks/NN-name.ipynb` from the root, as the workshop guide runs one notebook:
    # a plugin of this test reports what the channels are in that process.
    probe = tmp_path / "kernelpoll_probe.py"
    probe.write_text(
        "from pipeline import kernelpoll\n"
        "import pathlib\n"
        "def pytest_sessionfinish(session):\n"
        f"    pathlib.Path({str(tmp_path / 'seen')!r}).write_text(str(kernelpoll.installed()))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "kernelpoll_probe",
         "--collect-only", "notebooks/00-start-here.ipynb"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "seen").read_text() == "True"


FAKE_OTTER = """
import json, pathlib
from pipeline import kernelpoll

def main(autograder, **options):
    seen = kernelpoll.installed()
    test = {"name": "exercise_1", "score": float(seen), "max_score": 1.0, "output": str(seen)}
    results = pathlib.Path(autograder) / "results" / "results.json"
    results.write_text(json.dumps({"tests": [test]}))
"""


def test_grading_runs_each_notebook_with_the_sliced_channels(tmp_path, monkeypatch) -> None:
    # grade() runs otter's autograder in a process of its own; a stand-in for otter's runner,
    # first on the path, scores 1 when the channels of that process wait in slices.
    from pipeline.lessons import exercises

    fake = tmp_path / "fake" / "otter" / "run" / "run_autograder"
    fake.mkdir(parents=True)
    for folder in (fake.parent.parent, fake.parent):
        (folder / "__init__.py").write_text("")
    (fake / "__init__.py").write_text(FAKE_OTTER)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "fake"), str(REPO)]))
    bundles, room = tmp_path / "bundles", tmp_path / "room"
    bundles.mkdir()
    room.mkdir()
    with zipfile.ZipFile(bundles / "01-backpressure.zip", "w"):
        pass
    notebook = {"cells": [], "metadata": {"otter": {"assignment_name": "01-backpressure"}}}
    (room / "ada.ipynb").write_text(json.dumps(notebook))
    (grade,) = exercises.grade(room, bundles=bundles, out=tmp_path / "grades", checkout=REPO)
    assert grade.feedback == {"exercise_1": "True"} and grade.score == 1


def test_the_docs_build_waits_in_slices() -> None:
    # docs/conf.py as Sphinx runs it (its copying of the notebooks stood in for), then the
    # channels of that process.
    script = (
        "import runpy, sys, types\n"
        "sys.modules['sources'] = types.SimpleNamespace(gather=lambda root, here: None)\n"
        "runpy.run_path('docs/conf.py')\n"
        "from pipeline import kernelpoll\n"
        "print(kernelpoll.installed())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # conf.py finds the package
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "True"
