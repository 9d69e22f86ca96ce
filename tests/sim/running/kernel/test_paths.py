"""The kernel's replay is chosen by a context the caller enters, never by a module switch."""

from __future__ import annotations

import threading

import pytest

from pipeline.sim.running import kernel
from pipeline.sim.running.kernel import driver, paths, replay
from pipeline.sim.running.kernel import run as kernel_run
from pipeline.sim.running.kernel.paths import KernelPath, current, kernel_path


def test_no_kernel_module_holds_a_switch_the_tests_assign():
    for module in (kernel, kernel_run, driver, replay):
        for name in ("ARRAYS", "MODE", "SIZES"):
            assert not hasattr(module, name), (module.__name__, name)


def test_the_path_holds_inside_the_block_only_and_nests():
    assert current() == KernelPath()
    with kernel_path("plain", block=3) as outer:
        assert outer == current() == KernelPath(path="plain", block=3)
        with kernel_path(log=1) as inner:  # no path: the one in force, sizes merged
            assert inner == KernelPath(path="plain", block=3, log=1)
        assert current() == outer
    assert current() == KernelPath()


def test_another_thread_does_not_see_the_block():
    seen = []
    with kernel_path("compiled"):
        worker = threading.Thread(target=lambda: seen.append(current().path))
        worker.start()
        worker.join()
    assert seen == ["auto"]


def test_an_exception_leaves_the_default_in_force():
    with pytest.raises(KeyError), kernel_path("plain"):
        raise KeyError("x")
    assert current().path == "auto"


@pytest.mark.parametrize(
    ("args", "sizes", "match"),
    [
        (("fast",), {}, "path must be one of"),
        ((None,), {"block": 0}, "block must be an int >= 1, got 0"),
        ((None,), {"log": 1.5}, "log must be an int >= 1, got 1.5"),
        ((None,), {"heap": True}, "heap must be an int >= 1, got True"),
        ((None,), {"ready": float("nan")}, "ready must be an int >= 1"),
        ((None,), {"blocks": 3}, "'blocks' is not a size"),
    ],
)
def test_a_bad_path_or_size_is_named(args, sizes, match):
    with pytest.raises(ValueError, match=match), kernel_path(*args, **sizes):
        pass
    assert current() == paths.KernelPath()
