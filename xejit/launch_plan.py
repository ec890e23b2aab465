"""Repeated launches of ``kernel[grid](...)`` without re-deciding anything: prepared launches.

The full launch path binds the arguments, specializes, finds the compiled kernel, picks the queue,
checks and marshals every argument. When a launch took that path and all its array arguments
were numpy arrays in USM memory of the launch queue's context (``xejit.runtime.usm``: no copies),
its decisions are kept as a :class:`LaunchPlan`, keyed by what determines them: each positional
argument's kind (array dtype, shape, strides and 16-byte alignment; ``int``; ``float``; a
constexpr's type and value), the keyword arguments (constexprs and launch options, with their
types), and the environment variables that choose the launch path (:func:`launch_env`). A later
call with the same key reuses the plan: per call it only reads the arrays' USM memory (cached per
array object), checks written arrays are still writeable and integers fit their type, and submits.
A torch CPU tensor is taken as its numpy view (``runtime/host_views.py``; bfloat16 as ml_dtypes').
Anything unusual (a staged host array, a device tensor or array, a changed global the kernel read,
cleared compile caches, a value out of range) takes the full path, which raises the errors.
"""
from __future__ import annotations

from types import CellType
from typing import Any

import numpy as np

from . import options
from .runtime import cpu_threads
from .runtime import launch as _rt
from .runtime.host_views import numpy_view
from .runtime.opencl_launch import DirectLaunch, cl_ranges
from .arguments import LAUNCH_OPTIONS, launch_grid
from .codegen.abi import ADDRESS_KINDS, WRITTEN_KINDS
from .errors import LaunchError

#: the most plans one kernel keeps (one per argument signature; a shape is part of it)
MAX_PLANS = 256

_MISSING = object()
_generation = [0]   # bumped by invalidate(): plans made before are not used


def invalidate() -> None:
    """Stop using every plan made so far (``xejit.device_launch.clear_memory_caches`` calls it)."""
    _generation[0] += 1


#: the raw values of the XEJIT_* variables that decide what a launch runs: part of a plan's key,
#: read on every launch (setting XEJIT_DEBUG, XEJIT_EMULATE, ... takes the full path again). The
#: compile-only variables (XEJIT_STRICT, XEJIT_DUMP, ...) are not part of it, as they are not of
#: the full path's in-process memo of compiled kernels (``xejit.device_launch.compiled``).
launch_env = options.raw_launch


def plan_key(kernel: Any, args: tuple, kwargs: dict) -> tuple[tuple, list, frozenset] | None:
    """(key, per-array facts, open slots) of a call, or None when it cannot use a plan (an
    argument other than a numpy array, an int, a float or a positional constexpr).

    The key is flat (one tuple, no tuple per argument: built on every launch): the launch
    environment, the number of positional arguments, then per argument its dtype, shape, strides,
    address % 16 and queue (arrays), its type and value (constexprs) or its type (ints, floats),
    then name, value and type of each keyword argument. An array's facts are its zero-copy entry
    (``xejit.runtime.launch._zero_copy``), or its address when it has none yet: its queue slot in
    the key is then None, and its index is in the open slots (see :func:`_first_sight`)."""
    parts: list = [launch_env(), len(args)]
    arrays: list = []
    open_slots = []
    zc = _rt._zero_copy
    cpos = kernel._constexpr_positions
    for i, a in enumerate(args):
        t = type(a)
        if i in cpos:
            parts += (t, a)
        elif t is np.ndarray:
            z = zc.get(id(a))
            if z is not None and z[0]() is a:
                parts += (a.dtype, a.shape, a.strides, z[3], id(z[1]))
                arrays.append(z)
            else:   # not seen yet (e.g. a new result array): its queue is found after the lookup
                ptr = a.__array_interface__["data"][0]
                parts += (a.dtype, a.shape, a.strides, ptr % 16, None)
                open_slots.append(len(parts) - 1)
                arrays.append(ptr)
        elif t is int or t is float:
            parts.append(t)
        else:
            return None
    for k, v in kwargs.items():
        parts += (k, v, type(v))
    return tuple(parts), arrays, frozenset(open_slots)


def try_launch(kernel: Any, args: tuple, kwargs: dict, grid: Any) -> bool:
    """Launch through a plan if this call has one; False when the call must take the full path.

    (:func:`plan_key` inlined, and the arrays' USM memory collected on the way: every operation
    here is paid on each launch, and costs about twice what it does in isolation while the OpenCL
    runtime's worker threads still spin after the previous kernel.)"""
    parts: list = [launch_env(), len(args)]
    mems: list = []
    zc = _rt._zero_copy
    cpos = kernel._constexpr_positions
    i = 0
    for a in args:
        t = type(a)
        if i in cpos:
            parts += (t, a)
        elif t is np.ndarray:
            z = zc.get(id(a))
            if z is None or z[0]() is not a:   # (the queue's identity: both hold a reference to it)
                return _first_sight(kernel, args, kwargs, grid)
            parts += (a.dtype, a.shape, a.strides, z[3], id(z[1]))
            mems.append(z)
        elif t is int or t is float:
            parts.append(t)
        else:
            return _with_numpy_views(kernel, args, kwargs, grid)
        i += 1
    for k, v in kwargs.items():
        parts += (k, v, type(v))
    try:
        plan = kernel._plans.get(tuple(parts))
    except TypeError:   # an unhashable constexpr value
        return False
    return plan is not None and plan.launch(args, mems, grid)


def _with_numpy_views(kernel: Any, args: tuple, kwargs: dict, grid: Any) -> bool:
    """:func:`try_launch` of a call with torch CPU tensors, as their numpy views (the full path
    launches them as such too, and keeps its plan under their key: ``runtime/host_views.py``);
    False when no argument has one (other arguments take the full path)."""
    viewed = tuple(a if type(a) is np.ndarray else numpy_view(a) for a in args)
    if all(v is a for v, a in zip(viewed, args)):
        return False
    return try_launch(kernel, viewed, kwargs, grid)


def find(kernel: Any, args: tuple, kwargs: dict) -> tuple[LaunchPlan, list] | None:
    """The plan and the arrays' zero-copy entries :func:`try_launch` would use for this call
    (all its arrays seen before), else None. A caller that launches the same array objects again
    may keep both and call :meth:`LaunchPlan.launch` itself (no key built), if it checks what the
    key would: the launch environment (:func:`launch_env`), and the dtypes, shapes, strides,
    16-byte alignment and zero-copy entries (the queue) of arrays not its own."""
    got = plan_key(kernel, args, kwargs)
    if got is None or got[2]:
        return None
    plan = kernel._plans.get(got[0])
    return None if plan is None else (plan, got[1])


def _first_sight(kernel: Any, args: tuple, kwargs: dict, grid: Any) -> bool:
    """:func:`try_launch` for a call with a numpy array not seen before (e.g. a new result array):
    the plan found by its key, if the array is USM memory of that plan's queue's context."""
    got = plan_key(kernel, args, kwargs)
    if got is None:
        return False
    key, arrays, open_slots = got
    # the plans of this key with a queue of some plan's in the open slots: a lookup per queue
    # (scanning every plan of the kernel instead took ~5 us a call, more with more
    # plans: a repeated xejit.matmul with a new result array each call meets one)
    plans = []
    parts = list(key)
    for qid in list(_plan_queues):
        for j in open_slots:
            parts[j] = qid
        plan = kernel._plans.get(tuple(parts))
        if plan is not None:
            plans.append(plan)
    for plan in plans:
        mems = []
        for n, z in enumerate(arrays):
            if type(z) is int:   # first sight of this array: is it USM memory of the plan's queue's context?
                z = _rt.zero_copy_entry(args[plan.array_pos[n]], plan.queue, z, plan.by_address)
                if z is None:
                    break
            elif z[1] is not plan.queue:
                break
            mems.append(z)
        else:
            return plan.launch(args, mems, grid)
    return False


def remember(kernel: Any, args: tuple, kwargs: dict, module: Any, launched: tuple | None,
             runtime_pos: list[int], written: tuple[int, ...], meta: dict) -> None:
    """Keep a plan for this call, which just took the full path and launched ``launched`` =
    (queue, runtime kernel, ABI plan, workgroup size), if every argument allows one."""
    if launched is None or any(i >= len(args) for i in runtime_pos):
        return
    if any(k not in kernel.constexprs and k not in _launch_options() for k in kwargs):
        return
    got = plan_key(kernel, args, kwargs)
    if got is None:
        return
    queue, rk, abi, wg = launched
    key, arrays, _ = got
    for z in arrays:
        if type(z) is int or z[1] is not queue:   # staged (a host array) or another queue's
            return
    plan = LaunchPlan.build(kernel, module, args, queue, rk, abi, wg, runtime_pos, written, meta)
    if plan is None:
        return
    try:
        if len(kernel._plans) >= MAX_PLANS:
            kernel._plans.clear()
        kernel._plans[key] = plan
    except TypeError:
        return
    if id(queue) not in _plan_queues:
        if len(_plan_queues) >= _MAX_PLAN_QUEUES:
            _plan_queues.clear()   # (plans on other queues then take the full path once)
        _plan_queues[id(queue)] = queue


#: id -> queue of the queues plans were made for (kept alive here, so their ids stay theirs):
#: where :func:`_first_sight` looks for a plan of an array not seen yet
_plan_queues: dict[int, Any] = {}
_MAX_PLAN_QUEUES = 16


def _launch_options():
    return LAUNCH_OPTIONS


def _array_positions(args: tuple, kernel: Any) -> list[int]:
    cpos = kernel._constexpr_positions
    return [i for i, a in enumerate(args) if i not in cpos and type(a) is np.ndarray]


class LaunchPlan:
    """What the full path decided for one argument signature; :meth:`launch` replays it."""

    __slots__ = ("array_pos", "by_address", "checked_writeable", "direct", "generation", "grid_state", "kernel",
                 "mem_slots", "meta",
                 "module", "name", "other_reads", "plain_reads", "cell_reads", "queue", "scalar_slots", "sycl_kernel",
                 "template", "wg")

    @classmethod
    def build(cls, kernel, module, args, queue, rk, abi, wg, runtime_pos, written, meta) -> LaunchPlan | None:
        p = cls()
        p.kernel, p.module, p.queue, p.sycl_kernel, p.name = kernel, module, queue, rk.sycl_kernel, rk.name
        p.wg, p.meta, p.generation = tuple(wg), meta, _generation[0]
        # the globals the kernel read at compile time: a dict binding checked by identity here,
        # anything else (closure cells, lists, dicts) by GlobalRead.unchanged()
        reads = kernel._reads.get(id(module))
        reads = reads[1] if reads is not None and reads[0] is module else ()
        # (closure variables: a kernel defined in a function reads its module aliases through cells)
        by_identity = [r for r in reads if not isinstance(r.value, (list, dict))]
        p.plain_reads = tuple((r.scope, r.name, r.value) for r in by_identity if type(r.scope) is dict)
        p.cell_reads = tuple((r.scope, r.value) for r in by_identity if type(r.scope) is CellType)
        p.other_reads = tuple(r for r in reads if isinstance(r.value, (list, dict))
                              or type(r.scope) not in (dict, CellType))
        p.array_pos = _array_positions(args, kernel)
        slot_of_array = {pos: n for n, pos in enumerate(p.array_pos)}
        p.template, p.mem_slots, p.scalar_slots = [], [], []
        writeable = {runtime_pos[i] for i in written}
        for slot, ((i, kind, what), sig_kind) in enumerate(zip(abi, rk.signature)):
            pos = runtime_pos[i]
            v = args[pos]
            if what == "ptr":
                if pos not in slot_of_array:
                    return None
                # (the zero-copy entry's USM argument, or its address for the "addr" kinds)
                p.mem_slots.append((slot, slot_of_array[pos], 4 if sig_kind in ADDRESS_KINDS else 2))
                p.template.append(None)
                if sig_kind in WRITTEN_KINDS:
                    writeable.add(pos)
            elif what == "value":
                if sig_kind in ("i32", "i64", "u32", "u64") and type(v) is int:
                    lo, hi = _rt._INT_RANGE[sig_kind]
                    p.scalar_slots.append((slot, pos, _rt._SCALARS[sig_kind][0], lo, hi))
                elif sig_kind in ("f32", "f64") and type(v) is float:
                    p.scalar_slots.append((slot, pos, _rt._SCALARS[sig_kind][0], None, None))
                else:
                    return None
                p.template.append(None)
            else:   # a shape or stride: fixed by the key (shape and strides are part of it)
                if type(v) is not np.ndarray or sig_kind not in ("i32", "i64"):
                    return None
                d = int(what[-1])
                n = v.shape[d] if what.startswith("shape") else v.strides[d] // v.itemsize
                lo, hi = _rt._INT_RANGE[sig_kind]
                if not lo <= n <= hi:
                    return None
                p.template.append(_rt._SCALARS[sig_kind][0](n))
        p.by_address = all(i == 4 for _, _, i in p.mem_slots)   # host arrays are fine too
        p.checked_writeable = [slot_of_array[pos] for pos in sorted(writeable) if pos in slot_of_array]
        # the last tuple grid, its ranges and their OpenCL form: one object, replaced in one store
        # (threads launching one plan with different grids never see a grid with another's ranges)
        p.grid_state = (None, None, None)
        # through OpenCL itself (runtime/opencl_launch.py): arrays by address, the device's own queue
        direct = getattr(rk, "direct", None)
        p.direct = DirectLaunch(direct, rk.name, p.template) if direct is not None and p.by_address \
            and queue is rk.device.queue else None
        return p

    def launch(self, args: tuple, mems: list, grid: Any) -> bool:
        """Launch with these arguments (of this plan's key) and the zero-copy entries of their arrays."""
        if self.generation != _generation[0]:
            return False
        for scope, name, value in self.plain_reads:
            if scope.get(name, _MISSING) is not value:
                return False   # a global the kernel read changed: the full path rebuilds it
        for cell, value in self.cell_reads:
            try:
                if cell.cell_contents is not value:
                    return False
            except ValueError:   # an emptied cell
                return False
        for r in self.other_reads:
            if not r.unchanged():
                return False
        queue = self.queue
        for n in self.checked_writeable:
            if not args[self.array_pos[n]].flags.writeable:
                return False   # the full path raises the read-only error
        direct = self.direct if DirectLaunch.open else None
        if direct is not None:
            # its own cl_kernel: only arguments that changed are set again (an array's address
            # object is its zero-copy entry's, so the same object is the same address)
            k = direct.kernel()
            last = k.last
            for slot, n, i in self.mem_slots:
                v = mems[n][i]
                if v is None:
                    return False
                if last[slot] is not v:
                    k.set(slot, v, v)
            for slot, pos, ctype, lo, hi in self.scalar_slots:
                v = args[pos]
                if lo is not None and not lo <= v <= hi:
                    return False
                if type(v) is not int or last[slot] != v:   # (floats always: -0.0 == 0.0)
                    k.set(slot, ctype(v), v)
        else:
            kargs = self.template.copy()
            for slot, n, i in self.mem_slots:
                v = kargs[slot] = mems[n][i]
                if v is None:   # host memory (remembered by an "addr" launch) for a pointer argument
                    return False
            for slot, pos, ctype, lo, hi in self.scalar_slots:
                v = args[pos]
                if lo is not None and not lo <= v <= hi:
                    return False
                kargs[slot] = ctype(v)
        last_grid, ranges, cl = self.grid_state
        if type(grid) is not tuple or grid != last_grid:
            if callable(grid):
                grid = grid(self.meta)
            g = launch_grid(grid, self.kernel.fn.__name__)
            ranges = None if 0 in g else _rt._check_range(g, self.wg[:len(g)], self.name)
            cl = None if ranges is None or direct is None else cl_ranges(ranges)
            if type(grid) is tuple:
                self.grid_state = (grid, ranges, cl)
        if ranges is None:
            return True   # an empty grid launches nothing
        if cpu_threads._on_cpu:
            cpu_threads.before_launch()
        if direct is not None:
            direct.run(k, *(cl if cl is not None else cl_ranges(ranges)))
            if cpu_threads._countdown:
                cpu_threads.after_launch()
            return True
        try:
            # (dpctl's submit() waits itself; the event's wait() would be a second one)
            queue.submit_async(self.sycl_kernel, kargs, ranges[0], ranges[1]).wait()
        except Exception as e:  # noqa: BLE001  (dpctl's submit errors become one xejit error type)
            raise LaunchError(f"{self.name}: launch of {ranges[0][::-1]} work-items in workgroups of "
                              f"{ranges[1][::-1]} failed: {e}") from None
        if cpu_threads._countdown:
            cpu_threads.after_launch()
        return True


__all__ = ["MAX_PLANS", "LaunchPlan", "find", "invalidate", "launch_env", "plan_key", "remember", "try_launch"]
