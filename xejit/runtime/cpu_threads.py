"""The OpenCL CPU runtime's worker threads, kept off the core of the thread that launches (Linux).

The runtime (``libintelocl`` 2026.21) runs a kernel's work-groups on TBB worker threads and on
the thread that launched it, which runs work-groups itself while it waits. Each worker pins itself
to one core when it first gets work (``TaskDispatcher::OnThreadEntry`` ->
``clSetThreadAffinityToCore``; on a 2-CPU machine its one worker to CPU 1), leaving core 0 to the
launching thread -- which is the caller's thread, not pinned, so the scheduler may run it on the
worker's core. Then the two share one core, and keep sharing it while both spin between launches:
a kernel of many work-groups runs at one core's speed. 1x2048x2048 fp32 GEMV kernel, launching
thread held on a CPU during a 0.1 s sleep and then free, series of 100 launches: 0.14-0.22 ms a
launch from CPU 0, 0.33-0.45 ms from CPU 1 in 11 of 12 series (docs/compiler.md, "The runtime's
worker threads"); ``benchmarks/run.py``'s decode figures swung between those two from one timed
series to the next (which CPU the launching thread woke on after the series' sleep). Unpinning
the workers instead left the placement to the scheduler, which stacked them as often (13 of 24
such series fast against 12 of 24 pinned, loaded machine).

So before each launch the launching thread's CPU is read (``sched_getcpu``); when a worker is
pinned to it, that worker is pinned to a CPU of the mask no worker has instead. Workers are found
after launches 1, 2, 4, ... (up to 2^16: each worker pins itself when work first reaches it):
threads that appeared while xejit opened a device (``opening``: the runtime starts its workers
when dpctl first lists the devices or makes the CPU queue; measured: the one worker of this
2-CPU machine) and are pinned to one CPU of the mask of the thread that made the CPU device's
queue. No other thread is ever touched -- a thread of the user's, pinned or not, started before
or after the import -- so workers a runtime starts later (on first work, if it does so on
larger machines) or that dpctl had started before xejit opened a device are not found either. Several threads launching at
once from different CPUs may move a worker back and forth (a ``sched_setaffinity`` each, a few
us). ``XEJIT_CPU_AFFINITY=runtime`` leaves the runtime's pinning as it is.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import threading

from .. import options

#: launches until the next look for workers (0: not looking)
_countdown = 0
_interval = 1
_LAST_INTERVAL = 1 << 16
_mask: frozenset = frozenset()
#: the runtime's workers found: thread id -> the one CPU it is pinned to; and the CPU -> thread id
_workers: dict[int, int] = {}
_on_cpu: dict[int, int] = {}
_lock = threading.Lock()


def _threads() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return []


#: threads that appeared while xejit opened a device (``opening``): the runtime's, the only
#: ones ever moved
_runtime: set[int] = set()


@contextlib.contextmanager
def opening():
    """Around the dpctl calls that open a device: the threads that appear meanwhile are the
    runtime's (its workers start there)."""
    before = set(_threads())
    try:
        yield
    finally:
        with _lock:
            _runtime.update(set(_threads()) - before)


def _sched_getcpu():
    try:
        fn = ctypes.CDLL(None, use_errno=True).sched_getcpu
    except (OSError, AttributeError):
        return None
    fn.restype, fn.argtypes = ctypes.c_int, []
    return fn


_getcpu = _sched_getcpu()


def watch() -> None:
    """Start looking for the runtime's pinned workers: called when a CPU device's queue is made,
    from the thread whose CPU mask bounds where they may go."""
    global _countdown, _interval, _mask
    if not hasattr(os, "sched_setaffinity") or _getcpu is None or options.current().cpu_affinity == "runtime":
        return
    mask = frozenset(os.sched_getaffinity(0))
    if len(mask) < 2:
        return
    with _lock:
        if _countdown or _mask:
            return
        _mask = mask
        _countdown, _interval = 1, 1


def after_launch() -> None:
    """Called after each launch while looking (``_countdown`` non-zero): every 1, 2, 4, ...
    launches, find the workers."""
    global _countdown, _interval
    with _lock:   # (threads launching at once: each decrement counts, one of them looks)
        if _countdown <= 0:
            return
        _countdown -= 1
        if _countdown > 0:
            return
        _interval *= 2
        _countdown = _interval if _interval <= _LAST_INTERVAL else 0
    find_workers()


def find_workers() -> int:
    """Record every thread the runtime started (``opening``) that is pinned to one CPU of the
    watched mask (its workers); the number of workers known."""
    if not _mask:
        return 0
    with _lock:
        for tid in _threads():
            if tid not in _runtime or tid in _workers:
                continue
            try:
                cpus = os.sched_getaffinity(tid)
            except OSError:   # the thread ended meanwhile
                continue
            if len(cpus) == 1 and cpus < _mask:
                cpu = next(iter(cpus))
                _workers[tid] = cpu
                _on_cpu[cpu] = tid
        return len(_workers)


def before_launch() -> None:
    """Called before each launch once workers are known: if one is pinned to the CPU this thread
    runs on, pin it to a CPU of the mask that has no worker (none: leave it)."""
    cpu = _getcpu()
    tid = _on_cpu.get(cpu)
    if tid is None:
        return
    if options.current().cpu_affinity == "runtime":
        return
    with _lock:
        if _on_cpu.get(cpu) != tid:
            return
        free = sorted(_mask - set(_on_cpu) - {cpu})
        if not free:
            return
        try:
            os.sched_setaffinity(tid, {free[0]})
        except OSError:   # the thread ended: forget it
            del _workers[tid], _on_cpu[cpu]
            return
        del _on_cpu[cpu]
        _workers[tid], _on_cpu[free[0]] = free[0], tid


def _forget() -> None:
    """In a forked child: the parent's threads are not this process's (their ids may name other
    processes' threads), so nothing is known and nothing is watched."""
    global _countdown, _interval, _mask, _lock
    _lock = threading.Lock()   # (a parent's thread may have held it at the fork)
    _workers.clear()
    _on_cpu.clear()
    _runtime.clear()
    _countdown, _interval, _mask = 0, 1, frozenset()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)
