"""The OpenCL CPU runtime's worker threads, given the process's CPU affinity back (Linux).

The runtime (``libintelocl`` 2026.21) runs a kernel's work-groups on TBB worker threads and on
the thread that launched it, which runs work-groups itself while it waits. Each worker pins itself
to one core when it first enters the runtime's arena (``TaskDispatcher::OnThreadEntry`` ->
``clSetThreadAffinityToCore``: on a 2-CPU machine the one worker to CPU 1), while the launching
thread (the caller's) is not pinned. When the scheduler puts the launching thread on a worker's
core -- it keeps it there while both spin -- the two share one core for as long as the launches
go on and a kernel of many work-groups runs at one core's speed: 1x2048x2048 fp32 GEMV kernel
0.35 ms with the launching thread held on CPU 1, 0.19 ms on CPU 0 (``benchmarks/bench_gemv.py``'s
docstring). ``benchmarks/run.py``'s decode row swung between those two figures from one timed
series to the next: which core the launching thread woke on after the series' sleep.

So the threads the runtime pinned get the mask of the thread that made the CPU device's queue
back, and the scheduler places them: after a few launches (1, 2, 4, ... up to 2^16: each worker
pins itself when work first reaches it), every thread started since xejit's runtime was imported
and pinned to a single CPU of that mask is given the whole mask. Threads that existed before are
never touched (so a runtime dpctl had started before xejit was imported keeps its pinning). ``XEJIT_CPU_AFFINITY=runtime`` leaves the runtime's pinning
as it is.
"""
from __future__ import annotations

import os
import threading

from .. import options

#: launches until the next look at the threads (0: not watching)
_countdown = 0
_interval = 1
_LAST_INTERVAL = 1 << 16
_mask: frozenset = frozenset()
_lock = threading.Lock()


def _threads() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return []


#: the threads that existed when xejit's runtime was imported (before it made any device: the
#: runtime starts its workers when dpctl first lists the devices), never touched
_before = frozenset(_threads())


def watch() -> None:
    """Start watching for the runtime's pinned workers: called when a CPU device's queue is made,
    from the thread whose CPU mask they get."""
    global _countdown, _interval, _mask
    if not hasattr(os, "sched_setaffinity") or options.current().cpu_affinity == "runtime":
        return
    mask = frozenset(os.sched_getaffinity(0))
    if len(mask) < 2:
        return
    with _lock:
        if _countdown:
            return
        _mask = mask
        _countdown, _interval = 1, 1


def after_launch() -> None:
    """Called after each launch while watching (``_countdown`` non-zero): every 1, 2, 4, ...
    launches, give the runtime's pinned workers the mask back."""
    global _countdown, _interval
    _countdown -= 1
    if _countdown > 0:
        return
    _interval *= 2
    _countdown = _interval if _interval <= _LAST_INTERVAL else 0
    release_pinned_workers()


def release_pinned_workers() -> int:
    """Give every thread started since :func:`watch` and pinned to one CPU of the watched mask
    that mask; the number of threads changed."""
    if not _mask or options.current().cpu_affinity == "runtime":
        return 0
    changed = 0
    for tid in _threads():
        if tid in _before:
            continue
        try:
            cpus = os.sched_getaffinity(tid)
            if len(cpus) == 1 and cpus < _mask:
                os.sched_setaffinity(tid, _mask)
                changed += 1
        except OSError:   # the thread ended meanwhile
            continue
    return changed


def watching() -> bool:
    """Whether launches still look for pinned workers."""
    return _countdown > 0
