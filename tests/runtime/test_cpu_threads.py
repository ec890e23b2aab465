"""The OpenCL CPU runtime's pinned worker threads are kept off the launching thread's CPU
(xejit/runtime/cpu_threads.py)."""
import os
import threading

import numpy as np
import pytest

from xejit.runtime import build_program, cpu_threads, default_device

from . import kernels

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2
                                or cpu_threads._getcpu is None,
                                reason="needs Linux thread affinities, sched_getcpu and at least 2 CPUs")


@pytest.fixture
def pinned_main():
    """Runs the test's launches from one CPU at a time (the thread's mask is restored after)."""
    mask = os.sched_getaffinity(0)
    yield lambda cpu: os.sched_setaffinity(0, {cpu})
    os.sched_setaffinity(0, mask)


def test_launch_moves_the_runtime_worker_off_the_launching_cpu(monkeypatch, pinned_main):
    """The runtime pins its TBB worker to one CPU on its first work (CPU 1 of 2 here); a launch
    from that CPU first pins the worker to another, and the results stay right."""
    monkeypatch.delenv("XEJIT_CPU_AFFINITY", raising=False)
    dev = default_device()
    if dev.kind != "cpu":
        pytest.skip("the OpenCL CPU device is not the default device")
    vadd = build_program(kernels.vadd_f32()).kernel("vadd", ["ptr_in", "ptr_in", "ptr", "i32", "f32"])
    assert cpu_threads._mask == frozenset(os.sched_getaffinity(0))   # watched since the device was made
    n = 64 * 1024
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    c = np.full(n, np.nan, np.float32)
    # (earlier tests' launches moved the next look far ahead: look after the 1st, 2nd, 4th again)
    monkeypatch.setattr(cpu_threads, "_countdown", 1)
    monkeypatch.setattr(cpu_threads, "_interval", 1)
    for _ in range(4):
        vadd.launch((n // 64,), (64,), a, b, c, n, 0.5)
    assert cpu_threads._workers, "no runtime worker found pinned to a CPU"
    for tid, cpu in list(cpu_threads._workers.items()):
        assert os.sched_getaffinity(tid) == {cpu}
        pinned_main(cpu)
        c[...] = np.nan
        vadd.launch((n // 64,), (64,), a, b, c, n, 0.5)
        np.testing.assert_allclose(c, a.astype(np.float64) + 0.5 * b, rtol=1e-6)
        moved = os.sched_getaffinity(tid)
        assert len(moved) == 1 and moved != {cpu} and moved == {cpu_threads._workers[tid]}


@pytest.mark.parametrize("setting", [None, "runtime", "user"])
def test_a_pinned_thread_on_the_launching_cpu_is_moved(monkeypatch, pinned_main, setting):
    """A thread that appeared while a device was opened and is pinned to one CPU counts as a
    worker; before a launch from its CPU it is pinned to a CPU without one, unless
    XEJIT_CPU_AFFINITY=runtime. A thread of the user's, pinned the same way, is never moved."""
    if setting is None:
        monkeypatch.delenv("XEJIT_CPU_AFFINITY", raising=False)
    else:
        monkeypatch.setenv("XEJIT_CPU_AFFINITY", setting)
    mask = frozenset(os.sched_getaffinity(0))
    monkeypatch.setattr(cpu_threads, "_mask", mask)
    monkeypatch.setattr(cpu_threads, "_workers", {})
    monkeypatch.setattr(cpu_threads, "_on_cpu", {})
    monkeypatch.setattr(cpu_threads, "_runtime", set())   # (the real workers are not looked at)
    cpu = max(mask)
    done, ready = threading.Event(), threading.Event()
    tid = []

    def body():
        tid.append(threading.get_native_id())
        os.sched_setaffinity(0, {cpu})
        ready.set()
        done.wait(10)

    t = threading.Thread(target=body)
    if setting == "user":   # started outside a device's opening: a user's thread
        t.start()
    else:
        with cpu_threads.opening():
            t.start()
            ready.wait(10)
    try:
        ready.wait(10)
        if setting == "user":
            pinned_main(cpu)
            assert cpu_threads.find_workers() == 0
            cpu_threads.before_launch()
            assert os.sched_getaffinity(tid[0]) == {cpu}
            return
        assert cpu_threads.find_workers() == 1 and cpu_threads._workers == {tid[0]: cpu}
        pinned_main(cpu)
        cpu_threads.before_launch()
        expect = {cpu} if setting == "runtime" else {min(mask)}
        assert os.sched_getaffinity(tid[0]) == expect
        assert cpu_threads._on_cpu == {next(iter(expect)): tid[0]}
        pinned_main(min(mask))   # launching from the CPU it went to moves it back (runtime: never moved)
        cpu_threads.before_launch()
        assert os.sched_getaffinity(tid[0]) == {cpu}
        cpu_threads.before_launch()   # and from elsewhere nothing moves
        assert os.sched_getaffinity(tid[0]) == {cpu}
    finally:
        done.set()
        t.join()
