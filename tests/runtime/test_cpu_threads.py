"""The OpenCL CPU runtime's pinned worker threads get the process's CPU mask back
(xejit/runtime/cpu_threads.py)."""
import os
import threading

import numpy as np
import pytest

from xejit.runtime import build_program, cpu_threads, default_device

from . import kernels

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                                reason="needs Linux thread affinities and at least 2 CPUs")


def _started_since_import() -> dict[int, set[int]]:
    return {t: os.sched_getaffinity(t) for t in map(int, os.listdir("/proc/self/task")) if t not in cpu_threads._before}


def test_runtime_workers_are_not_pinned_after_launches(monkeypatch):
    """The runtime pins its TBB worker to one core on its first work (CPU 1 of 2 here); after a
    few launches of a kernel with more work-groups than CPUs no thread it started is pinned."""
    monkeypatch.delenv("XEJIT_CPU_AFFINITY", raising=False)
    dev = default_device()
    if dev.kind != "cpu":
        pytest.skip("the OpenCL CPU device is not the default device")
    vadd = build_program(kernels.vadd_f32()).kernel("vadd", ["ptr_in", "ptr_in", "ptr", "i32", "f32"])
    assert cpu_threads._mask == frozenset(os.sched_getaffinity(0))   # watched since the device was made
    # (earlier tests' launches moved the next look far ahead: look after the 1st, 2nd, 4th again)
    monkeypatch.setattr(cpu_threads, "_countdown", 1)
    monkeypatch.setattr(cpu_threads, "_interval", 1)
    n = 64 * 1024
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    c = np.full(n, np.nan, np.float32)
    for _ in range(4):
        vadd.launch((n // 64,), (64,), a, b, c, n, 0.5)
    np.testing.assert_allclose(c, a.astype(np.float64) + 0.5 * b, rtol=1e-6)
    mask = os.sched_getaffinity(0)
    started = _started_since_import()
    assert started, "the runtime started no worker thread"
    assert all(cpus == mask for cpus in started.values()), started


@pytest.mark.parametrize("setting", [None, "runtime"])
def test_release_gives_a_pinned_new_thread_the_mask(monkeypatch, setting):
    """A thread started after the import and pinned to one CPU gets the watched mask back, unless
    XEJIT_CPU_AFFINITY=runtime; the threads of before the import are never touched."""
    if setting is None:
        monkeypatch.delenv("XEJIT_CPU_AFFINITY", raising=False)
    else:
        monkeypatch.setenv("XEJIT_CPU_AFFINITY", setting)
    monkeypatch.setattr(cpu_threads, "_mask", frozenset(os.sched_getaffinity(0)))
    one = {max(os.sched_getaffinity(0))}
    done, ready = threading.Event(), threading.Event()
    tid = []

    def body():
        tid.append(threading.get_native_id())
        os.sched_setaffinity(0, one)
        ready.set()
        done.wait(10)

    t = threading.Thread(target=body)
    t.start()
    try:
        ready.wait(10)
        main = threading.get_native_id()
        main_before = os.sched_getaffinity(main)
        cpu_threads.release_pinned_workers()
        expect = one if setting == "runtime" else set(cpu_threads._mask)
        assert os.sched_getaffinity(tid[0]) == expect
        assert os.sched_getaffinity(main) == main_before
    finally:
        done.set()
        t.join()
