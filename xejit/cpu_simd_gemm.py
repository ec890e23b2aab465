"""bf16 GEMMs on the CPU device with the CPU's bf16 dot products (codegen/cpu_bf16_dot.py).

:func:`available` says whether this process's CPU device can run them: the CPU has AVX512_BF16
and a one-instruction probe kernel built by the driver returns the exact dot products (checked
once per process; the probe's build is cached on disk like every program). :func:`gemm` packs B
into VNNI panels and runs the kernel; ``xejit.matmul`` takes it for bf16 GEMMs of the packed
kernels' sizes (matmul._packed_applies) where it is available.

Example:
    >>> import numpy as np, ml_dtypes
    >>> a = np.ones((64, 64), ml_dtypes.bfloat16); b = np.ones((64, 64), ml_dtypes.bfloat16)
    >>> c = np.empty((64, 64), ml_dtypes.bfloat16)
    >>> if available():
    ...     gemm(a, b, c)
    ... else:
    ...     c[...] = 64
    >>> float(c[0, 0])
    64.0
"""
from __future__ import annotations

import ctypes
import threading
from typing import NamedTuple

import numpy as np

from . import options
from .codegen import cpu_bf16_dot as dot, cpu_gemv, cpu_simd
from .codegen.targets import get_target
from .errors import BuildError, LaunchError
from .ir.core import numpy_dtype
from .runtime import cpu_threads, usm
from .runtime.device import default_device
from .runtime.host_views import host_address
from .runtime.opencl_launch import DirectLaunch
from .runtime.program import build_program

_lock = threading.Lock()
_BFLOAT16 = numpy_dtype("bfloat16")   # (ml_dtypes')
_AVAILABLE: dict = {}
_SCRATCH = threading.local()
_LAUNCHES: dict = {}
#: batches of up to this many rows read a row-major B in place (dot_bf16_gemm_rows) when its N
#: is a multiple of the kernel's panel: packing B costs more. µs a call, one process, quiet VM,
#: M x (2048x2048 / 4096x1024), packed / in place: 8 1108 / 577, 1165 / 493; 16 1325 / 1012,
#: 1363 / 880; 32 2017 / 1146, 2163 / 1053; 64 3074 / 2026, 2864 / 1759
ROWS_MAX_M = 64


def _direct(name: str) -> DirectLaunch:
    """Kernel ``name``'s direct launch on the default device (built once per process and device)."""
    device = default_device()
    key = (name, device.filter_string)
    launch = _LAUNCHES.get(key)
    if launch is None:
        prog = build_program(cpu_simd.spirv_module(name), device)
        if prog.direct is None:
            raise LaunchError(f"{name}: the device's program has no OpenCL handle for a direct launch")
        launch = _LAUNCHES[key] = DirectLaunch(prog.direct, name, [None] * cpu_simd.kernel_args(name))
    return launch


def _run(launch: DirectLaunch, grid, ones, args: tuple) -> None:
    """Run ``launch`` on ``grid`` (a ctypes size array) work-groups of one work-item, its
    arguments (addresses and sizes) as 64-bit integers, through OpenCL directly
    (runtime/opencl_launch.py), keeping the runtime's workers off this thread's core as every
    launch does (runtime/cpu_threads.py)."""
    if not DirectLaunch.open:
        raise LaunchError(f"{launch.name}: xejit's launches are closed (the interpreter is exiting)")
    k = launch.kernel()
    last = k.last
    if tuple(last) != args:   # (one comparison in C: a repeated call changes an address or none)
        for slot, v in enumerate(args):
            if last[slot] != v:
                k.set(slot, ctypes.c_int64(v), v)
    if cpu_threads._on_cpu:
        cpu_threads.before_launch()
    launch.run(k, len(grid), grid, ones)
    if cpu_threads._countdown:
        cpu_threads.after_launch()


def _launch(name: str, grid: tuple[int, ...], *args: int) -> None:
    """:func:`_run` kernel ``name`` on ``grid``."""
    n = len(grid)
    _run(_direct(name), (ctypes.c_size_t * n)(*grid), (ctypes.c_size_t * n)(*([1] * n)), args)


def _cached_plan(name: str, key: tuple, make):
    """This thread's plan for ``key`` among its plans ``name`` (made by ``make()`` where there is
    none or it was made for another default device; at most 16 kept)."""
    plans = getattr(_SCRATCH, name, None)
    plan = None if plans is None else plans.get(key)
    if plan is None or plan.device is not default_device():
        plan = make()
        plans = getattr(_SCRATCH, name, None)   # (make may have replaced them)
        if plans is None or len(plans) >= 16:
            plans = {}
            setattr(_SCRATCH, name, plans)
        plans[key] = plan
    return plan


def _nothing_to_launch(a: np.ndarray, c: np.ndarray) -> None:
    """What a plan with no kernel does (an empty result, or an empty sum): zeros into ``c`` when
    K = 0."""
    if a.shape[1] == 0 and 0 not in c.shape:
        c[...] = 0


def available() -> bool:
    """Whether the default device is the CPU device, reads host memory, and its driver runs the
    bf16 dot-product kernels here (module docstring); False on a GPU, with an emulated GPU
    target, or where the CPU lacks the instruction."""
    device = default_device()
    key = (device.filter_string, options.current().cpu_bf16_dot)
    with _lock:
        if key in _AVAILABLE:
            return _AVAILABLE[key]
    ok = fma_available() and dot.cpu_has_bf16_dot() and _probe()
    with _lock:
        _AVAILABLE[key] = ok
    return ok


def fma_available() -> bool:
    """Whether the default device runs the kernels of plain FMAs (:func:`gemm_bt`'s fp32 ones,
    :func:`gemv`'s): the CPU device, reading host memory, compiling for a target without DPAS
    (not an emulated GPU: its kernels are the generic lowering's, as these are)."""
    device = default_device()
    return device.sycl_device.is_cpu and device.system_memory and get_target(device.target).dpas is None


def _probe() -> bool:
    """Run the probe kernel on pairs whose dot products are exact in fp32."""
    rng = np.random.default_rng(7)
    a = rng.integers(-8, 8, 32).astype(np.float32)
    b = rng.integers(-8, 8, 32).astype(np.float32)
    c = rng.integers(-64, 64, 16).astype(np.float32)
    want = c + (a * b).reshape(16, 2).sum(1)
    abits, bbits = ((x.view(np.uint32) >> 16).astype(np.uint16) for x in (a, b))   # exact: small integers
    try:
        _launch("dot_bf16_probe", (1,), c.ctypes.data, abits.ctypes.data, bbits.ctypes.data)
    except (BuildError, LaunchError):   # a driver that does not resolve the intrinsic
        return False
    return bool(np.array_equal(c, want))


class _Plan(NamedTuple):
    """What :func:`gemm` launches for one set of shapes and strides (its checks made once)."""
    device: object
    pack: DirectLaunch | None          # None: nothing to launch, or B read in place
    pack_grid: object
    pack_args: tuple
    mm: DirectLaunch | None            # None: an empty result, or zeros (K = 0)
    mm_grid: object
    mm_args: tuple
    bp: np.ndarray | None              # the scratch buffer the plan packs into (held: never stale)
    bp_addr: int
    ones: object


def gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """``c = a @ b`` for 2D bf16 numpy arrays in host-visible memory, ``a`` and ``c`` with unit
    column strides, ``c`` not overlapping ``a`` or ``b``; sums in fp32, ``c`` rounded to bf16
    (nearest-even). Call only where :func:`available`."""
    key = (a.shape, a.strides, b.shape, b.strides, c.shape, c.strides, a.dtype, b.dtype, c.dtype)
    plan = _cached_plan("plans", key, lambda: _plan(a, b, c))
    if plan.mm is None:
        _nothing_to_launch(a, c)
        return
    pa, pb, pc = host_address(a), host_address(b), host_address(c)
    if plan.pack is None:   # B read in place
        _run(plan.mm, plan.mm_grid, plan.ones, (pa, pb, pc) + plan.mm_args)
        return
    _run(plan.pack, plan.pack_grid, plan.ones, (pb, plan.bp_addr) + plan.pack_args)
    _run(plan.mm, plan.mm_grid, plan.ones, (pa, plan.bp_addr, pc) + plan.mm_args)


def _scratch(words: int) -> tuple[np.ndarray, int]:
    """This thread's packing buffer of at least ``words`` 32-bit words and its first 64-byte
    aligned address (the kernels' aligned vector loads and stores of B's panels)."""
    bp = getattr(_SCRATCH, "bp", None)
    if bp is None or bp.size < words + 16:
        bp = _SCRATCH.bp = usm.empty((words + 16,), np.uint32)
        _SCRATCH.plans = {}   # (plans of the old buffer keep it alive until they go)
    addr = bp.ctypes.data
    return bp, addr + (-addr % 64)


def _plan(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> _Plan:
    M, K = a.shape
    N = b.shape[1]
    if not (a.dtype == b.dtype == c.dtype == _BFLOAT16):
        raise TypeError(f"cpu_simd_gemm.gemm takes bfloat16 arrays, got {a.dtype}, {b.dtype} -> {c.dtype}")
    if (a.strides[1] != 2 and K > 1) or (c.strides[1] != 2 and N > 1) or c.shape != (M, N) or b.shape[0] != K \
            or any(s % 2 for s in a.strides + b.strides + c.strides):
        raise ValueError(f"cpu_simd_gemm.gemm: shapes {a.shape} @ {b.shape} -> {c.shape} with strides "
                         f"{a.strides}, {b.strides}, {c.strides}: needs matching shapes, unit column "
                         f"strides for a and c, whole elements")
    device = default_device()
    ones = (ctypes.c_size_t * 2)(1, 1)
    if M == 0 or N == 0 or K == 0:
        return _Plan(device, None, None, (), None, None, (), None, 0, ones)
    ldk, ldn = (s // 2 for s in b.strides)
    lda, ldc = a.strides[0] // 2, c.strides[0] // 2
    if M <= ROWS_MAX_M and ldn == 1 and N % dot.ROWS_NR == 0:
        return _Plan(device, None, None, (), _direct("dot_bf16_gemm_rows"),
                     (ctypes.c_size_t * 2)(-(-M // dot.ROWS_MR), N // dot.ROWS_NR), (M, N, K, lda, ldc, ldk),
                     None, 0, ones)
    kp2 = (K + 1) // 2
    panels = -(-N // dot.NR)
    bp, addr = _scratch(panels * kp2 * dot.NR)
    return _Plan(device, _direct("dot_bf16_pack_b"), (ctypes.c_size_t * 2)(panels, -(-kp2 // dot.PACK_PAIRS)),
                 (K, N, ldk, ldn), _direct("dot_bf16_gemm"), (ctypes.c_size_t * 2)(-(-M // dot.MR), panels),
                 (M, N, K, lda, ldc, 0), bp, addr, ones)


class _BtPlan(NamedTuple):
    """What :func:`gemm_bt` launches for one set of shapes and strides (its checks made once)."""
    device: object
    launch: DirectLaunch | None        # None: an empty result, or zeros (K = 0)
    grid: object
    ones: object
    scalars: tuple                     # M, N, K, lda, ldb, ldc


def gemm_bt(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """``c = a @ b`` for a column-major ``b`` (``b.T`` row-major: ``x @ w.T``), fp32 or bf16 host
    arrays of one dtype, ``a`` and ``c`` with unit column strides, ``c`` not overlapping them:
    dot products of rows read in place (codegen/cpu_bf16_dot.py, ``gemm_bt_module``); bf16 only
    where :func:`available`, fp32 on any CPU device that reads host memory."""
    key = (a.shape, a.strides, b.shape, b.strides, c.shape, c.strides, a.dtype, b.dtype, c.dtype)
    plan = _cached_plan("bt_plans", key, lambda: _bt_plan(a, b, c))
    if plan.launch is None:
        _nothing_to_launch(a, c)
        return
    # (b.T: row-major, where the buffer protocol gives its address)
    _run(plan.launch, plan.grid, plan.ones, (host_address(a), host_address(b.T), host_address(c)) + plan.scalars)


def _is_bf16(fn: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> bool:
    """Whether the operands are bf16 (else fp32); a TypeError for other or mixed dtypes."""
    bf16 = a.dtype == _BFLOAT16
    if not (a.dtype == b.dtype == c.dtype) or not (bf16 or a.dtype == np.float32):
        raise TypeError(f"cpu_simd_gemm.{fn} takes float32 or bfloat16 arrays of one dtype, got "
                        f"{a.dtype}, {b.dtype} -> {c.dtype}")
    return bf16


def _bt_plan(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> _BtPlan:
    M, K = a.shape
    N = b.shape[1]
    it = a.itemsize
    bf16 = _is_bf16("gemm_bt", a, b, c)
    if (a.strides[1] != it and K > 1) or (c.strides[1] != it and N > 1) or (b.strides[0] != it and K > 1) \
            or c.shape != (M, N) or b.shape[0] != K or any(s % it for s in a.strides + b.strides + c.strides):
        raise ValueError(f"cpu_simd_gemm.gemm_bt: shapes {a.shape} @ {b.shape} -> {c.shape} with strides "
                         f"{a.strides}, {b.strides}, {c.strides}: needs matching shapes, unit column strides "
                         f"for a and c, a column-major b")
    device = default_device()
    if M == 0 or N == 0 or K == 0:
        return _BtPlan(device, None, None, None, ())
    mr, nt = dot.BT_SKINNY if M == 1 else (dot.BT_MR, dot.BT_NT)
    return _BtPlan(device, _direct(dot.bt_name(bf16, mr, nt)), (ctypes.c_size_t * 2)(-(-M // mr), -(-N // nt)),
                   (ctypes.c_size_t * 2)(1, 1), (M, N, K, a.strides[0] // it, b.strides[1] // it, c.strides[0] // it))


#: the decode GEMV's K slices (work-groups of one work-item, shared by the runtime's threads:
#: 2 slices left one thread waiting for the other, 237 us against 164-176 with 4-16;
#: codegen/cpu_gemv.py)
GEMV_SLICES = 8
#: elements past N in each row of the GEMV's partial sums, and their first element half a page
#: from b's offset in its page: the kernel's loads of b and its loads and stores of the sums
#: then do not share L1 sets and 4 KB-aliasing offsets (as matmul._GEMV_P_GAP)
_GEMV_P_PAD, _GEMV_P_GAP = 16, 2048


class _GemvPlan(NamedTuple):
    """What :func:`gemv` launches for one set of shapes, strides and b's page offset."""
    device: object
    launch: DirectLaunch | None        # None: an empty result, or zeros (K = 0), or ``copy_c``
    grid: object
    ones: object
    scalars: tuple                     # N, K, lda, ldb, ldp, ldc, ks, slices
    p: np.ndarray                      # the scratch buffer of the partial sums (held: never stale)
    p_addr: int
    done: np.ndarray                   # the kernel's counter of finished slices (in p's buffer)
    done_addr: int
    b_page: int                        # b's offset in its 4 KB page (p is placed by it)
    copy_c: bool = False               # c's columns are not contiguous: computed into a copy


def gemv(a: np.ndarray, b: np.ndarray, c: np.ndarray, slot: threading.local | None = None) -> None:
    """``c = a @ b`` for up to ``max(cpu_gemv.ROWS)`` rows of ``a`` (a decode step) and a row-major
    ``b``, fp32 or bf16 host arrays of one dtype, ``a`` and ``b`` with unit column strides, ``c``
    not overlapping them: codegen/cpu_gemv.py's kernel sums GEMV_SLICES slices of K (fp32, FMAs),
    and the last slice to finish adds them into ``c`` (bf16: rounded nearest-even). Call where
    :func:`fma_available`. ``slot``: where a caller that has checked that the arrays' dtypes,
    shapes and strides and the default device are those of its earlier calls keeps this
    thread's plan (``matmul``'s recipe of the call), so that a repeated call makes no key.

    Example:
        >>> a = np.ones((1, 256), np.float32); b = np.full((256, 512), 0.5, np.float32)
        >>> c = np.empty((1, 512), np.float32)
        >>> if fma_available():
        ...     gemv(a, b, c)
        ... else:
        ...     c[...] = a @ b
        >>> float(c[0, 7])
        128.0
    """
    pb = host_address(b)
    plan = None if slot is None else getattr(slot, "plan", None)
    if plan is None or plan.b_page != pb % 4096:
        key = (a.shape, a.strides, b.shape, b.strides, c.shape, c.strides, a.dtype, b.dtype, c.dtype, pb % 4096)
        plan = _cached_plan("gemv_plans", key, lambda: _gemv_plan(a, b, c))
        if slot is not None:
            slot.plan = plan
    if plan.copy_c:   # c's columns not contiguous: into a new array, then copied
        tmp = np.empty(c.shape, c.dtype)
        gemv(a, b, tmp)
        c[...] = tmp
        return
    if plan.launch is None:
        _nothing_to_launch(a, c)
        return
    plan.done[0] = 0
    _run(plan.launch, plan.grid, plan.ones, (host_address(a), pb, plan.p_addr, host_address(c),
                                             plan.done_addr) + plan.scalars)


def _gemv_plan(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> _GemvPlan:
    """The plan of :func:`gemv` for these arrays' shapes and layout."""
    M, K = a.shape
    N = b.shape[1]
    it = a.itemsize
    bf16 = _is_bf16("gemv", a, b, c)
    if M > max(cpu_gemv.ROWS) or c.shape != (M, N) or b.shape[0] != K:
        raise ValueError(f"cpu_simd_gemm.gemv: shapes {a.shape} @ {b.shape} -> {c.shape}: needs at most "
                         f"{max(cpu_gemv.ROWS)} rows of a and matching shapes")
    device = default_device()
    if M == 0 or N == 0 or K == 0:
        return _GemvPlan(device, None, None, None, (), None, 0, None, 0, host_address(b) % 4096)
    if (a.strides[1] != it and K > 1) or (b.strides[1] != it and N > 1) or any(s % it for s in a.strides + b.strides):
        raise ValueError(f"cpu_simd_gemm.gemv: strides {a.strides}, {b.strides} of a {a.shape} and b {b.shape}: "
                         f"needs unit column strides for a and b, whole elements")
    if (c.strides[1] != it and N > 1) or any(s % it for s in c.strides):
        return _GemvPlan(device, None, None, None, (), None, 0, None, 0, host_address(b) % 4096, copy_c=True)
    mr = min(r for r in cpu_gemv.ROWS if r >= M)
    ks = -(-K // GEMV_SLICES)
    ks = -(-ks // cpu_gemv.RB) * cpu_gemv.RB
    slices = -(-K // ks)
    ldp = N + _GEMV_P_PAD
    words = slices * mr * ldp + 1024 + 16
    buf = getattr(_SCRATCH, "gemv_p", None)
    if buf is None or buf.size < words:
        buf = _SCRATCH.gemv_p = usm.empty((words,), np.float32)
        _SCRATCH.gemv_plans = {}   # (plans of the old buffer keep it alive until they go)
    base = buf.ctypes.data
    at = (host_address(b) + _GEMV_P_GAP - base) % 4096 // 4   # (elements)
    done = buf[-16:].view(np.uint32)[:1]   # (past the sums)
    lda = a.strides[0] // it if M > 1 else K
    ldc = c.strides[0] // it if M > 1 else N
    return _GemvPlan(device, _direct(cpu_gemv.gemv_name(bf16, mr)), (ctypes.c_size_t * 1)(slices),
                     (ctypes.c_size_t * 1)(1), (N, K, lda, b.strides[0] // it, ldp, ldc, ks, slices), buf,
                     base + 4 * at, done, done.ctypes.data, host_address(b) % 4096)
