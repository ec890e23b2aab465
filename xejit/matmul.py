"""``xejit.matmul``: a drop-in GEMM over the DSL kernel (``xejit.kernels.gemm``), autotuned per shape.

Semantics follow ``torch.matmul``: 1-D operands get a dimension prepended (``a``) or appended
(``b``) that is removed from the result; leading (batch) dimensions broadcast. Inputs are torch
tensors (CPU, or XPU: no copies, on torch's current stream), numpy arrays, including numpy views
of USM shared memory from ``xejit.runtime.usm`` (dpctl 0.22 has no ``dpctl.tensor``), or arrays
in SYCL USM memory exported through DLPack (oneAPI) or ``__sycl_usm_array_interface__`` (no
copies; docs/xpu.md). The result has the caller's kind on the caller's device (device arrays:
through the caller's array namespace's ``from_dlpack``, else an ``xejit.runtime.usm_array.UsmArray``),
and numpy results live in USM shared memory when kernels run on the device. Supported
dtypes are bfloat16 (torch only), float16, float32 and int8; float results keep the input
dtype (fp32 accumulation), int8 results are int32. ``bias`` (shape ``[N]``) and ``activation``
(``"relu"``, ``"gelu_tanh"``) are fused into the kernel's epilogue.

Every 2D operand slice that is row- or column-major (``x``, ``x.T``, ``x[:, ::1][:k]``, ...) is
passed to the kernel as it is; other strides (negative ones too) are copied once. A batch that shares one ``b``
runs as one launch over the stacked rows when ``a``'s batch and row dimensions collapse.

Each new (M, N, K, dtypes, layouts) is autotuned over ``xejit.kernels.gemm.CONFIGS[target]``
(configs that do not fit the target or are far larger than the problem are pruned first); the
choice is kept in memory and under ``XEJIT_CACHE_DIR``. ``XEJIT_MATMUL_TUNE`` limits the trials
(``0`` or ``1``, the default: none, build only the config the cost model ranks best; ``N``: time the
N best-ranked; ``all``: build and time every config).

Example:
    >>> import numpy as np, xejit
    >>> a = np.ones((3, 4), np.float32); b = np.full((4, 2), 0.5, np.float32)
    >>> xejit.matmul(a, b, activation="relu").tolist()   # doctest: +SKIP
    [[2.0, 2.0], [2.0, 2.0], [2.0, 2.0]]
"""
from __future__ import annotations

import functools
import itertools
import os
import threading
from typing import Any, NamedTuple

import numpy as np

from .errors import XejitTypeError, XejitValueError
from . import cpu_simd_gemm, language as xl, options
from .arguments import is_torch
from .autotuner import autotune, current_target, estimate_gemm, gemm_resources
from .codegen import cpu_bf16_dot, cpu_gemv, lower_generic
from .codegen.passes.pipelining import PREFETCH_WAR_READS
from .codegen.targets import get_target
from .ir.core import bf16_bits_to_f32, f32, f32_to_bf16_bits, numpy_dtype
from .kernels.gemm import (GEMV_BK, GEMV_MAX_M, GEMV_PANELS, GEMV_SLICES, GEMV_TILES, PACKED_CONFIGS, STRIP_MAX_K, STRIP_NC,
                           configs_for, convert_kernel, gemm_kernel, gemm_packed_kernel, gemm_strip_kernel,
                           gemv_kernel, pack_a_kernel, pack_b_kernel)
from .language import cdiv
from .launch_plan import find as find_plan, launch_env
from .runtime import usm
from .runtime.host_views import as_tensor, is_plain_tensor, numpy_view
from .runtime.launch import _usm_owner, known_address, known_zero_copy
from .runtime.usm_array import UsmArray, from_object, is_device_object

__all__ = ["matmul", "ACTIVATIONS", "gemm_tuner", "MatmulError"]


class MatmulError(XejitValueError, RuntimeError):
    """Operands that ``torch.matmul`` would reject for the same reason (shapes that do not match,
    batch dimensions that do not broadcast, mixed dtypes, a wrong ``out=`` shape or dtype): a
    ``RuntimeError`` like torch's, and a ``ValueError`` and ``XejitError`` too."""

ACTIVATIONS = ("relu", "gelu_tanh")
_ACT_ALIASES = {"gelu-tanh": "gelu_tanh", "gelu": "gelu_tanh", "none": None}
_SUPPORTED = ("bfloat16", "float16", "float32", "int8")


# --- array kinds --------------------------------------------------------------------------------

_is_torch = is_torch   # (the arguments' test, answered once per type)


def _is_usm(x: Any) -> bool:
    """A :class:`xejit.runtime.usm_array.UsmArray`: a DLPack oneAPI or SUAI array's memory, viewed
    without a copy."""
    return type(x).__name__ == "UsmArray" and type(x).__module__ == "xejit.runtime.usm_array"


def _kind(x: Any) -> str:
    return "torch" if _is_torch(x) else "usm" if _is_usm(x) else "numpy"


#: dtype -> its name here (str() of a numpy dtype is ~2.5 us: every call names its operands')
_DTYPE_NAMES: dict[Any, str] = {}


def _dtype_name(x: Any) -> str:
    d = x.dtype
    name = _DTYPE_NAMES.get(d)
    if name is None:
        name = str(d).replace("torch.", "")
        if len(_DTYPE_NAMES) > 64:
            _DTYPE_NAMES.clear()
        _DTYPE_NAMES[d] = name
    return name


def _describe(x: Any) -> str:
    return f"{_dtype_name(x)} {list(x.shape)}"


def _strides(x: Any) -> tuple[int, ...]:
    if _is_torch(x):
        return tuple(x.stride())
    return tuple(s // x.itemsize for s in x.strides)


def _as_strided(x: Any, shape: tuple[int, ...], strides: tuple[int, ...]) -> Any:
    if _is_torch(x):
        return x.as_strided(shape, strides, x.storage_offset())
    if _is_usm(x):
        return x.as_strided(shape, tuple(s * x.itemsize for s in strides))
    return np.lib.stride_tricks.as_strided(x, shape, tuple(s * x.itemsize for s in strides))


def _interpreting() -> bool:
    return options.current().interpret


def _empty_like_kind(proto: Any, shape: tuple[int, ...], dtype: str) -> Any:
    if _is_torch(proto):
        import torch
        return torch.empty(shape, dtype=getattr(torch, dtype), device=proto.device)
    if _is_usm(proto):   # device memory on the caller's queue, like an XPU tensor's
        return UsmArray.empty(shape, dtype, proto.queue)
    if not _interpreting():
        return usm.empty(shape, numpy_dtype(dtype))  # no copy on the way into the kernel
    return np.empty(shape, numpy_dtype(dtype))


def _is_2d_ok(x: Any) -> bool:
    """True when a 2D array is row- or column-major (the kernel takes it as it is)."""
    r, c = x.shape
    s0, s1 = _strides(x)
    if s0 < 0 or s1 < 0:   # a reversed view (x[::-1]): copied
        return False
    return (s1 == 1 or c == 1) or (s0 == 1 or r == 1)


def _extent(x: Any) -> tuple[int, int] | None:
    """[first byte, last byte + 1) of the memory ``x`` spans, or None when it has no elements."""
    if 0 in tuple(x.shape):
        return None
    if _is_usm(x):
        return x.extent()
    if _is_torch(x):
        ptr, it = x.data_ptr(), x.element_size()
    else:
        ptr, it = x.__array_interface__["data"][0], x.itemsize
    offs = [(n - 1) * st * it for n, st in zip(x.shape, _strides(x))]
    return ptr + sum(min(o, 0) for o in offs), ptr + sum(max(o, 0) for o in offs) + it


def _overlaps(x: Any, y: Any) -> bool:
    """Whether the memory ranges of two arrays intersect (numpy's ``may_share_memory`` test, for
    torch tensors too: a bound, so interleaved views count as overlapping)."""
    if type(x) is np.ndarray and type(y) is np.ndarray:
        return np.may_share_memory(x, y)   # the same bounds test, in C
    if _kind(x) != _kind(y) or (_is_torch(x) and x.device != y.device):
        return False
    ex, ey = _extent(x), _extent(y)
    return ex is not None and ey is not None and ex[0] < ey[1] and ey[0] < ex[1]


def _distinct_elements(x: Any) -> bool:
    """Whether a numpy array's elements are distinct memory (np.lib.stride_tricks can make views
    where two indices name one element; writing those is ill-defined)."""
    if x.ndim == 0 or (not _is_usm(x) and (x.flags.c_contiguous or x.flags.f_contiguous)):
        return True
    dims = sorted((abs(st), n) for n, st in zip(x.shape, x.strides) if n > 1)
    span = x.itemsize
    for st, n in dims:
        if st < span:
            return False
        span = st * n
    return True


def _contiguous(x: Any) -> Any:
    if _is_usm(x):
        return x.copy()   # strided device memory: through the host (a rare fallback)
    return x.contiguous() if _is_torch(x) else np.ascontiguousarray(x)


# --- shapes ------------------------------------------------------------------------------------

def _broadcast(a_batch: tuple[int, ...], b_batch: tuple[int, ...], a: Any, b: Any) -> tuple[int, ...]:
    n = max(len(a_batch), len(b_batch))
    pa, pb = (1,) * (n - len(a_batch)) + a_batch, (1,) * (n - len(b_batch)) + b_batch
    out = []
    for x, y in zip(pa, pb):
        if x != y and 1 not in (x, y):
            raise MatmulError(f"xejit.matmul: batch dimensions of a ({_describe(a)}) and b "
                             f"({_describe(b)}) do not broadcast")
        out.append(max(x, y) if 0 not in (x, y) else 0)
    return tuple(out)


def _collapse_rows(x: Any, keep_last: int) -> Any | None:
    """A 2D view [prod(leading dims), last] of ``x`` when its leading dims (batch and rows)
    collapse into one stride and the last dim is the contiguous one; else None."""
    shape, strides = list(x.shape), list(_strides(x))
    if strides[-1] != 1 and shape[-1] != 1 or min(strides) < 0:
        return None
    lead = [(s, st) for s, st in zip(shape[:-1], strides[:-1]) if s != 1]
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    for (s0, st0), (s1, st1) in zip(lead, lead[1:]):
        if st0 != st1 * s1:
            return None
    row_stride = lead[-1][1] if lead else max(keep_last, 1)
    if row_stride < shape[-1]:
        return None
    return _as_strided(x, (rows, shape[-1]), (row_stride, 1))


# --- the tuned kernel --------------------------------------------------------------------------

_TUNERS: dict[str, Any] = {}


def _shape_prune(configs, named, **kwargs):
    """Drop configs whose tile is far larger than the problem, and 1-row tiles for tall ones
    (keeps tuning short); always keeps at least the config with the smallest tile."""
    M, N = int(named["M"]), int(named["N"])

    def cap(v: int) -> int:
        return 1 << max(v - 1, 0).bit_length()

    smallest_m = min(c.kwargs["BM"] for c in configs)
    smallest_n = min(c.kwargs["BN"] for c in configs)
    keep = [c for c in configs if c.kwargs["BM"] <= max(cap(M), smallest_m)
            and c.kwargs["BN"] <= max(cap(N), smallest_n)
            and c.kwargs["BM"] >= min(cap(M) // 16, 4)   # no 1-row tiles for tall problems
            and not (M > WIDE_DECODE_MAX_M and _wide_decode(c))]
    return keep or [min(configs, key=lambda c: c.kwargs["BM"] * c.kwargs["BN"])]


#: wide decode tiles (8 x 64 and more a subgroup, the workgroup 8 rows tall) only up to this M:
#: their fewer instructions per DPAS (dg2 column-major B fp16 8x512x64/8sg 5.67 against 16x16
#: tiles' 14.25) would rank them first for tall GEMMs too, where B is read again for every 8 rows of C,
#: traffic the per-DPAS model does not see
WIDE_DECODE_MAX_M = 64


def _wide_decode(c) -> bool:
    """A config of one 8-row subgroup tile per workgroup row, at least 64 columns wide."""
    kw, n = c.kwargs, c.num_subgroups or 1
    return kw["BM"] == 8 and kw["BN"] // n >= 64


def _perf_model(M, N, K, BM, BN, BK, num_subgroups=None, *, target=None, a=None, b=None, c=None, ACC=None,
                PRECISION=None, grf_mode="default", **_):
    """A rough relative cost of a config: the padded work over the workgroups that run at once
    (``Target.model_workgroups_at_once`` on a GPU target: a placeholder of the target's data, so
    the ranking does not depend on the host; 4 a host core on the CPU device), with a penalty for
    small tiles (more operand traffic per flop). Used to rank configs when
    tuning is limited (``XEJIT_MATMUL_TUNE``).

    With ``target`` and the arrays, on targets with DPAS and 2D block IO, the work is scaled by
    what a subgroup's k-loop issues per DPAS at best: its DPAS, two instructions per 2D block load
    (the send and the write of its coordinate into its address payload, which the XeGPU lowering
    makes per message; the loads from the blocking pass's plan, ``estimate_gemm``'s
    ``loads_per_kstep``), the same per prefetch message of the pipelining pass's plan
    (``prefetches_per_kstep``) plus IGC's 3 no-op payload reads each on pvc, and four
    instructions of loop control (which replace the tile term's 4 / BK there). Workgroup tiles of equal shape
    split over fewer subgroups have larger subgroup tiles and fewer loads per DPAS: decode's
    8x512x64 is 8x64 per subgroup over 8 subgroups (16 fp16 DPAS, 6 loads) against 8x32 over 16
    (8 DPAS, 4 loads), measured by Intel's compiler at pvc 2.88 / 3.88 instructions per DPAS in
    fp16 and 3.5 / 5.5 in int8; column-major fp16 B (one transposed load per DPAS B block) takes
    64x32 tiles with BK=32 (6 loads for 32 DPAS: pvc 1.94, bmg 1.69) over 32x32 tiles with BK=128
    (20 for 64: 2.17 / 1.69). Decode tiles whose k-step of B takes more than half the register
    file are pruned (``autotuner.decode_b_kstep_limit``: tf32 8x512x64/8sg, 256 registers of B,
    pvc 3.75, bmg 2.69 against 8x512x32/8sg 2.88 / 2.62).

    Without 2D block IO (dg2) the figures come from the block-read lowering's plan
    (``codegen/block_read_costs.py``): two instructions per message (the send and its address),
    plus the k-step's packing of B^T on registers, the staged panel's barrier and its loop
    control, which take the place of the tile term's 4 / BK. For 8x4096x4096 this picks the
    best-measured decode configs (acm-g10): fp16 / bf16 row-major 8x512x32/8sg (8x64 subgroup
    tiles by column parity with the A^T spread staged in SLM, ``codegen/parity_dpas.py``: 4.28
    instructions per DPAS issued, 8.6 per DPAS of work; 8x256x32/8sg 5.62; B^T packed 24.75 with
    8x256x16/8sg) over 8x256x32/16sg (8x16 tiles, 26.5), which the 4 / BK term picked; int8
    row-major 8x512x32/8sg (byte parity: 5.03 per DPAS issued, 20.1 per DPAS of work);
    column-major B 8x512x64/8sg (fp16 / bf16 5.67 / 5.64) and 8x512x128/8sg (int8 5.56). 8x64 tiles are ranked only
    for M <= ``WIDE_DECODE_MAX_M`` (``_shape_prune``). DPAS beyond the work (column parity) count
    as other instructions, not as DPAS."""
    t = None if target is None else get_target(target) if isinstance(target, str) else target
    at_once = t.model_workgroups_at_once if t is not None else None
    if at_once is None:   # the CPU device (or no target): 4 workgroups a host core
        at_once = 4 * (os.cpu_count() or 1)
    wgs = cdiv(int(M), BM) * cdiv(int(N), BN)
    padded = wgs * BM * BN * max(int(K), 1)
    share = padded / min(wgs, at_once)
    cost = share * (1 + 8 / BM + 8 / BN + 4 / BK)
    if t is None or a is None or b is None or t.dpas is None:
        return cost
    est = estimate_gemm(t, BM, BN, BK, num_subgroups, grf_mode or "default", a, b, c if c is not None else a,
                        ACC or f32, PRECISION)
    dpas, loads, other = (est.get(f"{x}_per_kstep") for x in ("dpas", "loads", "other"))
    if not dpas:
        return cost
    if other is None:
        # 2D block IO: the k-step's loop control as 4 (no 4 / BK guess), and its prefetch
        # messages as 2 each (send, coordinate) plus IGC's no-op payload reads on pvc: tf32
        # column-major B 256x256x16/32sg (one split prefetch, 1.84) over 256x128x64/32sg (two, 2.17),
        # which the 4 / BK term ranked first; pvc's int8 takes 256x256x64/32sg (one split prefetch
        # for 32 DPAS: row-major 1.69, column-major 1.81) over 128x128x128/16sg (1.84 / 2.22).
        pf = est.get("prefetches_per_kstep") or 0
        pf_cost = 2 + (PREFETCH_WAR_READS if t.block_io.payload_war_workaround else 0)
        return share * (1 + 8 / BM + 8 / BN) * (dpas + 2 * loads + pf_cost * pf + 4) / dpas
    # the block-read plan counts the step's loop control and packing (``other``): no 4 / BK guess
    return share * (1 + 8 / BM + 8 / BN) * (dpas + 2 * loads + other) / dpas


#: configs a new shape builds when ``XEJIT_MATMUL_TUNE`` is unset (see :func:`tune_limit`)
DEFAULT_TUNE_LIMIT = 1


def tune_limit(target: str) -> int | None:
    """How many configs a new shape builds and times (``XEJIT_MATMUL_TUNE``: 0 or 1 = no trials,
    build only the best-ranked config; N = the N best ranked; ``all`` = every config, None).

    Default 1: each config costs a compile and a driver build (~0.4 s of CPU on the CPU device,
    seconds for a GPU), so a cold first call building 4 took 2-5 s; the cost model's pick was
    within ~15% of full tuning's on the shapes measured (docs/autotune-and-matmul.md)."""
    v = options.current().matmul_tune or ""
    if v in ("", "default"):
        return DEFAULT_TUNE_LIMIT
    if v == "all":
        return None
    try:
        return max(1, int(v))
    except ValueError:
        raise XejitValueError(f"XEJIT_MATMUL_TUNE must be 'all' or a number of configs, got {v!r}") from None


def gemm_tuner(target: str | None = None):
    """The autotuned GEMM kernel for ``target`` (default: the current device's target)."""
    target = target or current_target()
    limit = tune_limit(target)
    tuner = _TUNERS.get((target, limit))
    if tuner is None:
        opts = options.current()
        warmup, rep = opts.matmul_tune_warmup_ms, opts.matmul_tune_rep_ms
        prune = {"early_config_prune": _shape_prune}
        if limit is not None:
            prune.update(perf_model=functools.partial(_perf_model, target=target), top_k=limit)
        tuner = autotune(configs_for(target), key=["M", "N", "K"], prune_configs_by=prune,
                         warmup=warmup, rep=rep, resources=gemm_resources("a", "b", "c"))(gemm_kernel)
        _TUNERS[(target, limit)] = tuner
    return tuner


#: (numpy a and b: dtype, shape, strides; activation; environment) -> _Recipe of an earlier call
_RECIPES: dict[tuple, tuple] = {}


def _recipe_key(a: Any, b: Any, act: str | None, out: np.ndarray | None = None) -> tuple:
    return (a.dtype, a.shape, a.strides, b.dtype, b.shape, b.strides, act, options.raw(),
            None if out is None else (out.dtype, out.shape, out.strides))


def _fast_matmul(a: np.ndarray, b: np.ndarray, act: str | None, out: np.ndarray | None = None,
                 key: tuple | None = None) -> np.ndarray | None:
    """``act(a @ b)`` for 2D numpy operands (and ``out=``) with the dtypes, shapes, strides and
    activation of an earlier call (that call checked them and chose the config): the result array
    and one launch, without re-deriving anything; None when there is no such call, or its tuner
    or choice has changed since (a retune, ``XEJIT_MATMUL_TUNE``), or ``out`` is read-only or
    may share memory with an operand (the full path raises, or computes into a new array)."""
    try:
        r = _RECIPES.get(_recipe_key(a, b, act, out) if key is None else key)
    except TypeError:
        return None
    if r is None:
        return None
    if out is not None and (not out.flags.writeable or np.may_share_memory(out, a) or np.may_share_memory(out, b)):
        return None
    if r[0] == "gemv":   # the skinny kernel: nothing tuned to re-check; the host writes the result
        _, shape, rdtype, acc = r
        c = np.empty(shape, rdtype) if out is None else out
        if act is not None or not _gemv_replay(a, b, c):
            _gemv(a, b, None, c, acc, act)
        return c
    if r[0] == "simd_gemv":   # the decode GEMV of explicit SIMD (its operands' layout is the key's,
        # and so are the XEJIT_* variables that choose the device: the slot keeps its plan)
        _, shape, rdtype, slot = r
        c = np.empty(shape, rdtype) if out is None else out
        cpu_simd_gemm.gemv(a, b, c, slot)
        return c
    if r[0] == "bt":   # dot products of a's rows and b's columns, b read in place (layout: the key's)
        _, shape, rdtype = r
        c = np.empty(shape, rdtype) if out is None else out
        cpu_simd_gemm.gemm_bt(a, b, c)
        return c
    if r[0] == "packed":   # the packed kernels: nothing tuned either
        _, shape, rdtype = r
        c = np.empty(shape, rdtype) if out is None else out
        _packed(a, b, c)
        return c
    tuner, tuner_id, tkey, config, meta, grid, shape, rdtype, acc = r
    if _TUNERS.get(tuner_id) is not tuner or tuner.cache.get(tkey) is not config:
        return None
    c = usm.empty(shape, rdtype) if out is None else out
    M, K = a.shape
    tuner.best_config = config
    tuner.kernel[grid](a, _b_for_gemm(b, M), c, c, M, shape[1], K, ACC=acc, HAS_BIAS=False, ACT=act, **meta)
    return c


def _launch(a2: Any, b2: Any, bias: Any, c2: Any, acc: Any, activation: str | None,
            recipe: tuple | None = None) -> None:
    """Launch the tuned GEMM; ``recipe`` = (key, a, b) of a call :func:`_fast_matmul` may repeat."""
    M, K = a2.shape
    N = b2.shape[1]
    if M == 0 or N == 0:
        return
    if K == 0:
        # an empty sum: the activation of the bias (or of zero)
        z = np.zeros((M, N), np.float64)
        if bias is not None:
            z = z + _host_values(bias)
        with np.errstate(all="ignore"):
            z = _activate(z, activation)
        _write(c2, z)
        return
    if _gemv_direct_applies(a2, b2, bias, c2, acc, activation):
        _gemv_direct(a2, b2, c2, acc)
        return
    if bias is None and activation is None and _bt_applies(a2, b2, c2) and _gemm_bt(a2, b2, c2):
        if recipe is not None:
            _remember(recipe, ("bt", tuple(c2.shape), c2.dtype))
        return
    if bias is None and activation is None and _dot_bf16_applies(a2, b2, c2) and _dot_bf16(a2, b2, c2):
        if recipe is not None:
            _remember(recipe, ("packed", tuple(c2.shape), c2.dtype))
        return
    if bias is None and activation is None and _gemv_simd_applies(a2, b2, c2) and _gemv_simd(a2, b2, c2):
        if recipe is not None:
            _remember(recipe, ("simd_gemv", tuple(c2.shape), c2.dtype, threading.local()))
        return
    if _gemv_applies(a2, b2, c2):
        _gemv(a2, b2, bias, c2, acc, activation)
        if recipe is not None and bias is None:
            _remember(recipe, ("gemv", tuple(c2.shape), c2.dtype, acc))
        return
    if bias is None and activation is None and _packed_applies(a2, b2, c2):
        _packed(a2, b2, c2)
        if recipe is not None:
            _remember(recipe, ("packed", tuple(c2.shape), c2.dtype))
        return
    tuner = gemm_tuner()
    b_given = b2
    b2 = _b_for_gemm(b2, M)
    tuner[lambda meta: (cdiv(M, meta["BM"]), cdiv(N, meta["BN"]))](
        a2, b2, bias if bias is not None else c2, c2, M, N, K,
        ACC=acc, HAS_BIAS=bias is not None, ACT=activation)
    config = tuner.best_config
    if recipe is not None and config is not None and config.pre_hook is None and not _interpreting():
        tuner_id = next((k for k, t in _TUNERS.items() if t is tuner), None)
        kw = {"ACC": acc, "HAS_BIAS": False, "ACT": activation}
        tkey = tuner.key_of(tuner._named((a2, b_given, c2, c2, M, N, K), kw))
        if tuner_id is not None and tuner.cache.get(tkey) is config:
            meta = config.all_kwargs()
            grid = (cdiv(M, meta["BM"]), cdiv(N, meta["BN"]))
            _remember(recipe, (tuner, tuner_id, tkey, config, meta, grid, tuple(c2.shape), c2.dtype, acc))


def _remember(recipe: tuple, what: tuple) -> None:
    if len(_RECIPES) > 1024:
        _RECIPES.clear()
    _RECIPES[recipe] = what


#: skinny GEMMs take gemv_kernel when b has at least this many elements (below, one launch of
#: the tuned GEMM is as fast and needs no host-side sum)
_GEMV_MIN_ELEMENTS = 1 << 16
#: ... and M is at most this: GEMV_MAX_M rows at a time (:func:`_gemv`), so that a batch builds
#: the kernels of two block heights, not one per M. Each block streams b again (from L3 at these
#: sizes); at M >= 9 the kernel is compute-bound, at ~100 GFLOP/s on two Zen 4 cores. xejit.matmul
#: fp32, GFLOP/s, blocks / before (tuned gemm_kernel; the packed kernels at M >= 64) / numpy in
#: the next process: 9x2048x2048 57 / 16 / 55; 16x2048x2048 109 / 56 / 80; 32x2048x2048 108 /
#: 26 / 111; 48x2048x2048 110 / - / 150; 64x2048x2048 103 / 83-91 / 150; 64x1024x1024 100 / 57
#: / 155; 96x2048x2048 87 / 141 (packed) / 170.
_GEMV_BLOCKED_MAX_M = 64


def _gemv_applies(a: Any, b: Any, c: Any) -> bool:
    """A skinny GEMM (M <= GEMV_MAX_M, or a batch of up to _GEMV_BLOCKED_MAX_M rows where row
    blocks win: :func:`_row_blocks_win`; a large row-major b) on a target without DPAS (the CPU
    device), with a result the host can write (numpy, torch CPU): the K-split row-streaming
    kernel, whose partial sums the host adds (device results: :func:`_gemv_direct_applies`)."""
    M, K = a.shape
    N = b.shape[1]
    if M > _GEMV_BLOCKED_MAX_M or K * N < _GEMV_MIN_ELEMENTS or _interpreting() or _is_usm(c):
        return False
    if _is_torch(c) and c.device.type != "cpu":
        return False
    if _strides(b)[1] != 1 or get_target(current_target()).has_dpas:
        return False
    return M <= GEMV_MAX_M or _row_blocks_win(M, K, a, b, c)


#: batches of 9-64 rows take gemv_kernel in row blocks from this K on, and from
#: _GEMV_BLOCKED_MID_K when they have more than 16 rows and the packed kernels do not apply;
#: otherwise the tuned or packed GEMM. Each block streams all of b again, which pays when b's
#: rows are long in K and the GEMM's k loop is the short part. xejit.matmul fp32, GFLOP/s,
#: blocks / tuned (packed at M = 64 where it applies) / numpy, one process each, 3 interleaved
#: rounds, quiet VM: 16x1024x128 29 / 60 / 69, 16x2048x256 64 / 109 / 80, 16x4096x512 103 / 132
#: / 90, 16x1024x1024 93 / 123 / 88, 16x2048x2048 115 / 85 / 88, 16x512x4096 133 / 126 / 112;
#: 32x1024x128 26 / 43 / 82, 32x2048x256 47 / 55 / 123, 32x4096x512 100 / 55 / 129, 32x1024x1024
#: 91 / 62 / 125, 32x2048x2048 111 / 32 / 125; 64x1024x128 26 / 52 / 128, 64x4096x512 76 / 154
#: (packed) / 153, 64x1024x1024 91 / 142 (packed) / 155, 64x2048x2048 96 / 61 (packed) / 145,
#: 64x512x4096 101 / 71 (packed) / 133.
_GEMV_BLOCKED_MIN_K = 2048
_GEMV_BLOCKED_MID_K = 512


def _row_blocks_win(M: int, K: int, a: Any, b: Any, c: Any) -> bool:
    """Whether a batch of more than GEMV_MAX_M rows is faster in gemv_kernel's row blocks."""
    if K >= _GEMV_BLOCKED_MIN_K:
        return True
    return M > 16 and K >= _GEMV_BLOCKED_MID_K and not _packed_applies(a, b, c)


class _GemvGeometry(NamedTuple):
    """How gemv_kernel covers an M x N x K skinny GEMM: its grid (K slices, column panels), the
    rows of a K slice (a multiple of BK), the columns of a panel (a multiple of BN), the first
    panel's start (<= 0) and the constexprs (tile, rows a step) of M."""
    grid: tuple[int, int]
    ks: int
    width: int
    n0: int
    meta: dict


#: gemv_kernel's tile width for an N that GEMV_TILES' width does not divide and this one does: a
#: ragged last tile runs the masked version of the column step (its B rows gathered lane by lane)
#: once per row step. 1xNx2048 fp32 kernel + host sum, one runtime thread (taskset, alternating
#: processes): N = 2064 417-454 us with 32-column tiles, 373-376 with 16; N = 2048 equal
#: (331-345 / 336-347)
_GEMV_NARROW_BN = 16


def _gemv_geometry(M: int, N: int, K: int, slices: int, panels: int, n0: int) -> _GemvGeometry:
    """gemv_kernel's cover of ``M x N x K`` in about ``slices`` K slices and ``panels`` column
    panels starting at column ``n0`` (the one home of the tile and panel arithmetic)."""
    bn, rb = GEMV_TILES[M]
    if n0 == 0 and N % bn and N % _GEMV_NARROW_BN == 0 and bn > _GEMV_NARROW_BN:
        bn = _GEMV_NARROW_BN   # no ragged last tile (see _GEMV_NARROW_BN)
    bk = GEMV_BK[M]
    ks = cdiv(cdiv(K, slices), bk) * bk
    width = cdiv(cdiv(N - n0, panels), bn) * bn
    meta = {"BM": M, "BN": bn, "BK": bk, "RB": rb}
    if n0:
        meta["PEEL"] = True   # the partial first tile out of the column loop (gemv_kernel)
    return _GemvGeometry((cdiv(K, ks), cdiv(N - n0, width)), ks, width, n0, meta)


def _launch_gemv(a: Any, b: Any, p: Any, acc: Any, g: _GemvGeometry) -> None:
    """gemv_kernel over ``g``: ``p``'s row block s (M rows) gets K slice s of ``a @ b``."""
    gemv_kernel[g.grid](a, b, p, b.shape[1], a.shape[1], g.ks, g.width, g.n0, ACC=acc, **g.meta)


#: column panels (programs) of gemv_kernel writing a device result directly (one K slice each).
#: xejit.matmul on DLPack device arrays, fp32, 2048x2048 b, one process, 5 interleaved rounds of
#: 30 calls, loaded VM, CPU ms per call (median / min): M=1 tuned gemm_kernel 3.91 / 3.08, panels
#: 1 / 2 / 4 / 8: 2.39 / 1.63, 2.36 / 1.83, 2.66 / 2.34, 3.29 / 2.91; M=8 gemm_kernel 6.97 / 6.86,
#: panels 4.59 / 4.45, 4.78 / 4.73, 5.23 / 4.88, 5.57 / 5.22 (every panel re-reads a's row and
#: streams a part of each of b's rows; the launch and DLPack overheads are a large share at M=1).
GEMV_DIRECT_PANELS = 1


def _gemv_direct_applies(a: Any, b: Any, bias: Any, c: Any, acc: Any, activation: str | None) -> bool:
    """A skinny GEMM whose result is device memory (a UsmArray: the host must not add partial
    sums in it) of the accumulator's dtype, row-major, with no epilogue: gemv_kernel with one K
    slice writes it directly."""
    M, K = a.shape
    N = b.shape[1]
    if not _is_usm(c) or bias is not None or activation is not None or _interpreting():
        return False
    if M > GEMV_MAX_M or K * N < _GEMV_MIN_ELEMENTS or _strides(b)[1] != 1:
        return False
    if _dtype_name(c) != ("int32" if acc == xl.int32 else "float32") or _strides(c)[1] != 1 and N > 1:
        return False
    return not get_target(current_target()).has_dpas


def _gemv_direct(a: Any, b: Any, c: Any, acc: Any) -> None:
    """``c = a @ b`` by gemv_kernel, one program per column panel over the whole K (tails past K
    are masked loads of zeros), storing its sums straight into ``c``."""
    _launch_gemv(a, b, c, acc, _gemv_geometry(a.shape[0], b.shape[1], a.shape[1], 1, GEMV_DIRECT_PANELS, 0))


#: gemv_kernel shifts its column tiles onto b's cache lines for M (rounded up to a power of two)
#: at least this (tiles of 16 columns). 8x2048x2048 fp32, kernel alone, numpy b 16 bytes past a line, loaded VM (medians of 6 medians, one process):
#: no shift 2.79 ms, shifted 2.01 (min 1.86 vs 1.10); matmul with b copied to a 64-byte aligned
#: buffer 0.99 ms against 1.58. At M=1 (then BN=64, 33 tiles a row step) it measured 0.45 vs 0.47
#: ms, and with BN=32 the kernel's CPU per call took 1.67-1.82x OpenBLAS's on one core shifted,
#: 1.01-1.12x not: not worth the masked first tile of every row step. With the first tile peeled
#: (gemv_kernel's PEEL) and partial tiles' b rows read by clamped block reads, matmul 1x2048x2048
#: numpy b, one runtime thread, 4 rounds of alternating processes: shifted 341-443 us against
#: 341-384 unshifted (USM b 334-375): still no gain at M = 1.
_GEMV_ALIGN_MIN_BM = 4


def _address(x: Any) -> int | None:
    """The address of a host array's first element (numpy, torch CPU), else None."""
    if isinstance(x, np.ndarray):
        # an array launched before has it in its zero-copy entry (twice per GEMV call)
        known = known_address(x)
        return x.__array_interface__["data"][0] if known is None else known
    if _is_torch(x):
        return x.data_ptr()
    return None


def _aligning_shift(b: Any, bm: int) -> int:
    """The first column tile's start (<= 0) that puts b's row pieces on 64-byte lines, when every
    row starts at the same offset in its line (else 0)."""
    if bm < _GEMV_ALIGN_MIN_BM:
        return 0
    name = _dtype_name(b)
    item = 2 if name == "bfloat16" else np.dtype(name).itemsize
    addr = _address(b)
    if addr is None or (_strides(b)[0] * item) % 64 or addr % item:
        return 0
    return -((addr % 64) // item)


#: gemv_kernel's partial sums: rows this many elements longer than N, and the buffer placed half a
#: page away from b (addresses mod 4096), so p's tile rows and b's rows do not share page offsets:
#: the core matches loads to pending stores by the address bits below 4 KB (an in-place
#: accumulator of two register strips, since dropped, took 8.2 ms instead of 2.06 at 8x2048x2048
#: with BK 8), and at equal offsets they all sit in one L1 set. Kernel alone, one runtime thread,
#: min of 30-60 calls, two alternating runs on the loaded VM: 4x2048x2048 1.13-1.20 -> 0.95-1.07
#: ms, 8x2048x2048 2.24-2.29 -> 1.92-1.97 (numpy one thread 1.47 / 1.90).
_GEMV_P_PAD = 16
_GEMV_P_GAP = 2048


#: gemv_kernel reads a numpy ``a`` of at most this many bytes (8 rows of K = 8192 fp32) from a copy
#: in a per-thread buffer made once per dtype and shape (:func:`_staged`), not from the caller's
#: array. A decode step's activations are a new array every call; a launch finds its prepared plan
#: by its arrays' identity (launch_plan), so a new array took the first-sight path and registered a
#: zero-copy entry (+32-127 us a call at 1x2048x2048 fp32, +9-20 at 1x256x256, loaded VM; docs/
#: autotune-and-matmul.md, "A new activation array every call").
_GEMV_STAGE_MAX_BYTES = 1 << 18
#: the most staging buffers one thread keeps (one per (dtype, shape) of a)
_GEMV_STAGE_MAX_BUFFERS = 8


def _staged(a: np.ndarray) -> np.ndarray:
    """A copy of ``a`` in this thread's staging buffer for its dtype and shape (always the same
    array object, so launches find their plan by identity). Copied on every call, so a caller's
    array changed in place or a new one is never read stale; per thread, and launches are
    synchronous, so no other call uses the buffer until this one returns."""
    bufs = getattr(_SCRATCH, "gemv_a", None)
    if bufs is None:
        bufs = _SCRATCH.gemv_a = {}
    key = (a.dtype, a.shape)
    buf = bufs.get(key)
    if buf is None:
        if len(bufs) >= _GEMV_STAGE_MAX_BUFFERS:
            bufs.clear()
            _forget_replays()
        buf = bufs[key] = usm.empty(a.shape, a.dtype)
    np.copyto(buf, a)
    return buf


def _gemv_partials(a: Any, b: Any, acc: Any) -> np.ndarray:
    """Launch :func:`~xejit.kernels.gemm.gemv_kernel` (the part of :func:`_gemv` on the device):
    the K slices' partial sums, [slices * M, N] in this thread's scratch buffer. A small numpy
    ``a`` is read from a copy (:func:`_staged`)."""
    M, K = a.shape
    N = b.shape[1]
    staged = type(a) is np.ndarray and a.nbytes <= _GEMV_STAGE_MAX_BYTES
    if staged:
        a = _staged(a)
    addr = _address(b)
    # the geometry and the scratch view of an earlier call with the same shapes and b's offset
    # in its page (they depend on nothing else): ~8 us of Python a call otherwise
    key = (M, N, K, acc, b.strides if type(b) is np.ndarray else _strides(b), b.dtype,   # (byte strides: 1 us less)
           None if addr is None else addr % 4096)
    plans = getattr(_SCRATCH, "gemv_plans", None)
    if plans is None:
        plans = _SCRATCH.gemv_plans = {}
    hit = plans.get(key)
    replay = None
    if hit is not None and any(v is hit[1] for v in getattr(_SCRATCH, "gemv_views", {}).values()):
        g, p, replay = hit
        # the same staged a and scratch view, b of the same layout (the key): their launch plan
        # directly, once b's zero-copy entry (its queue) and the launch environment are checked
        # (try_launch builds a key of ~40 items instead: ~5 us a call)
        if replay is not None and replay[0] is a and replay[1] is not None and replay[4] == launch_env():
            plan, za, zp = replay[1], replay[2], replay[3]
            zb = known_zero_copy(b)
            if zb is not None and zb[1] is plan.queue:
                if plan.launch((a, b, p, N, K, g.ks, g.width, g.n0), [za, zb, zp], g.grid):
                    _note_replay(a, b, p, g, replay)
                    return p
                replay = None   # a stale plan (cleared caches, a changed global): find the new one
    else:
        g = _gemv_geometry(M, N, K, GEMV_SLICES, GEMV_PANELS, _aligning_shift(b, 1 << max(M - 1, 0).bit_length()))
        p = _scratch("gemv", g.grid[0] * M, N, np.int32 if acc == xl.int32 else np.float32, pitch=N + _GEMV_P_PAD,
                     at=None if addr is None else (addr + _GEMV_P_GAP) % 4096)   # every element written
    _launch_gemv(a, b, p, acc, g)
    if staged and type(b) is np.ndarray and (replay is None or replay[0] is not a or replay[4] != launch_env()):
        # (no plan, e.g. a b staged for a device that does not read host memory: not looked for again)
        found = find_plan(gemv_kernel, (a, b, p, N, K, g.ks, g.width, g.n0), {"ACC": acc, **g.meta})
        replay = (a, None, None, None, launch_env()) if found is None else \
            (a, found[0], found[1][0], found[1][2], launch_env())
    if len(plans) >= _SCRATCH_VIEWS:
        plans.clear()
    plans[key] = (g, p, replay)
    _note_replay(a, b, p, g, replay)
    return p


#: the most gemv launches (one per b array) a thread keeps for :func:`_gemv_replay`
_GEMV_REPLAYS = 64


def _note_replay(a: Any, b: Any, p: np.ndarray, g: _GemvGeometry, replay: tuple | None) -> None:
    """Keep a planned launch (``replay``: staged a, plan, a's and p's zero-copy entries, launch
    environment) for :func:`_gemv_replay`, keyed by b's id and checked by its zero-copy entry's
    weak reference (b itself is not held)."""
    if replay is None or replay[1] is None or replay[0] is not a:
        return
    zb = known_zero_copy(b)
    if zb is None or zb[1] is not replay[1].queue:
        return
    recs = getattr(_SCRATCH, "gemv_replays", None)
    if recs is None:
        recs = _SCRATCH.gemv_replays = {}
    rec = recs.get(id(b))
    if rec is not None and rec[1] is zb[0] and rec[2] is replay[1] and rec[0] is a and rec[5] is p:
        return
    if len(recs) >= _GEMV_REPLAYS:
        recs.clear()
    M, N = a.shape[0], b.shape[1]
    recs[id(b)] = (a, zb[0], replay[1], replay[2], replay[3], p, (N, a.shape[1], g.ks, g.width, g.n0), g.grid,
                   p.reshape(-1, M, N), replay[4])


_NO_REPLAYS: dict = {}


def _forget_replays() -> None:
    """Drop this thread's gemv replays (a scratch or staging buffer they hold is replaced)."""
    recs = getattr(_SCRATCH, "gemv_replays", None)
    if recs:
        recs.clear()


def _gemv_replay(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> bool:
    """``c = a @ b`` by this thread's planned gemv_kernel launch (:func:`_gemv_partials`) kept
    for this ``b`` array (its live zero-copy entry) and an ``a`` of the same shape
    and dtype: ``a`` copied into the staged buffer, the plan launched, the K slices added into
    ``c``; False where that does not apply or the plan is stale (then nothing is written but the
    staged copy). A decode loop's repeated call: ~9 us of Python less a call than going through
    :func:`_gemv` (host time besides the launch, 2000 calls: 1x2048x2048 fp32 25.6 -> 16.5 us,
    1x256x256 13.3 -> 8.9)."""
    rec = getattr(_SCRATCH, "gemv_replays", _NO_REPLAYS).get(id(b))
    if rec is None:
        return False
    staged, bref, plan, za, zp, p, scalars, grid, parts, env = rec
    zb = known_zero_copy(b)
    if zb is None or zb[0] is not bref or a.shape != staged.shape or a.dtype is not staged.dtype \
            or c.dtype is not parts.dtype or c.shape != parts.shape[1:] or launch_env() != env:
        return False
    np.copyto(staged, a)
    if not plan.launch((staged, b, p) + scalars, [za, zb, zp], grid):
        del _SCRATCH.gemv_replays[id(b)]   # stale (cleared caches, a changed global): the full path
        return False
    np.add.reduce(parts, axis=0, out=c)
    return True


def _gemv(a: Any, b: Any, bias: Any, c: Any, acc: Any, activation: str | None) -> None:
    """``c = act(a @ b + bias)`` by :func:`~xejit.kernels.gemm.gemv_kernel`, GEMV_MAX_M rows of a
    at a time (:func:`_gemv_rows`; b streams once per block, from L3 after the first)."""
    a, b, c = numpy_view(a), numpy_view(b), numpy_view(c)
    for i in range(0, a.shape[0], GEMV_MAX_M):
        _gemv_rows(a[i:i + GEMV_MAX_M], b, bias, c[i:i + GEMV_MAX_M], acc, activation)


def _gemv_rows(a: Any, b: Any, bias: Any, c: Any, acc: Any, activation: str | None) -> None:
    """``c = act(a @ b + bias)`` for at most GEMV_MAX_M rows: K in about GEMV_SLICES slices times
    N in GEMV_PANELS column panels, one program each, the slices' sums in a USM buffer placed
    away from b's page offsets, added here (a few hundred KB at most) with the epilogue applied
    in float64 (ints: in int32, as the kernel); with no epilogue, added into a numpy ``c`` of the
    accumulator's dtype directly (torch CPU tensors: their numpy views)."""
    M, N = a.shape[0], b.shape[1]
    is_int = acc == xl.int32
    p = _gemv_partials(a, b, acc)
    parts = p.reshape(-1, M, N)
    if bias is None and activation is None and type(c) is np.ndarray and c.dtype == p.dtype:
        # straight into c in the kernel's accumulator type (fp32: the K-slices' partial sums are
        # added as the kernel adds its products; float64 and a copy cost ~15 us a call)
        np.add.reduce(parts, axis=0, out=c)
        return
    z = parts.sum(axis=0, dtype=np.int32 if is_int else np.float64)
    if bias is not None:
        bv = _host_values(bias)
        z = z + (bv.astype(np.int32) if is_int else bv)
    with np.errstate(all="ignore"):
        z = _activate(z, activation)
    _write(c, z)


#: float GEMMs take the packed kernels when M*N*K reaches this (2^24: 256^3 in, 200^3 out).
#: xejit.matmul fp32 on numpy arrays, GFLOP/s, quiet VM, packed / tuned gemm_kernel / numpy (next
#: process): 512^3 187 / 121 / 191; 256x1024x256 165 / 68 / 103; 1024x1024x128 177 / 135 / 132;
#: 100x1000x1000 136 / 112 / 99. Since a repeated packed call skips the full path (its recipe),
#: also below 2^26 (one process each, 3 interleaved rounds): 256^3 141 / 117 / 182, 384^3 176 /
#: 139 / 205, 128x512x512 152 / 111 / 183, 256x512x256 161 / 100 / 187, 1024x128x256 166 / 147 /
#: 203; below 2^24 not: 128x128x512 76 / 111 / 162, 96x256x384 108 / 114 / 173, 200^3 84 / 83 /
#: 153, 512x128x128 109 / 102 / 195. The cost is a cold first call
#: (empty cache, fresh process), which builds three kernels (pack_b, pack_a, the GEMM) instead of
#: one: 512^3 0.71-0.80 s against 0.38-0.46 (the warm one 0.06-0.08 s either way). Building them
#: in threads did not shorten it (the OpenCL CPU driver serializes its builds: pack_a's took 0.61
#: s wall for 0.16 s of CPU). (Before, on the loaded VM, the cold call took 3.5-5.0 s against 1.7,
#: so the bound was 2^28.)
_PACKED_MIN_WORK = 1 << 24


#: operand dtypes the packed kernel takes: the packing widens 16-bit floats to fp32 once
_PACKED_DTYPES = ("float32", "bfloat16", "float16")


def _packed_applies(a: Any, b: Any, c: Any) -> bool:
    """A large float GEMM on a target without DPAS (the CPU device: the kernel is its register
    microkernel), host-visible result."""
    M, K = a.shape
    N = b.shape[1]
    if M * N * K < _PACKED_MIN_WORK or min(M, N, K) < 64 or _interpreting() or _is_usm(c):
        return False
    if _dtype_name(a) not in _PACKED_DTYPES or _dtype_name(c) != _dtype_name(a):
        return False
    if _is_torch(c) and c.device.type != "cpu":
        return False
    return not get_target(current_target()).has_dpas


_SCRATCH = threading.local()


def _scratch(name: str, rows: int, cols: int, dtype: Any, pitch: int | None = None,
             at: int | None = None) -> np.ndarray:
    """This thread's USM scratch buffer ``name`` as a [rows, cols] array (reused: fresh pages cost
    faults every call; per thread, so concurrent calls never share one), ``pitch`` elements
    between rows (default cols), its first element at ``at`` bytes into a 4 KB page (default: the
    buffer's start). Launches are synchronous, so a buffer is free again when the call that used
    it returns."""
    dtype = np.dtype(dtype)
    pitch = cols if pitch is None else pitch
    size = rows * pitch + 4096 // dtype.itemsize
    buf = getattr(_SCRATCH, name, None)
    if buf is None or buf.dtype != dtype or buf.size < size:
        _forget_replays()   # (they hold views of the old buffer)
        buf = usm.empty((size,), dtype)
        setattr(_SCRATCH, name, buf)
        setattr(_SCRATCH, name + "_views", {})
    offset = 0 if at is None else ((at - buf.ctypes.data) % 4096) // dtype.itemsize
    # the same view object for the same shape: a launch finds its prepared plan by the array's
    # identity (launch_plan); a new view each call took the slower first-sight path (~40 us).
    # A few shapes are kept (a batch's row blocks alternate between two).
    views = getattr(_SCRATCH, name + "_views")
    key = (rows, cols, pitch, offset)
    view = views.get(key)
    if view is None:
        if len(views) >= _SCRATCH_VIEWS:
            views.clear()
            _forget_replays()
        view = views[key] = buf[offset:offset + rows * pitch].reshape(rows, pitch)[:, :cols]
    return view


#: the most views of one scratch buffer kept (:func:`_scratch`)
_SCRATCH_VIEWS = 4


def _packed(a: Any, b: Any, c: Any) -> None:
    """``c = a @ b`` by packing b into BN-column panels (pack_b_kernel) and a into BM-row strips
    (pack_a_kernel), both fp32, then, for K up to STRIP_MAX_K, gemm_strip_kernel (all of K summed
    in registers, c stored once), else the K-blocked gemm_packed_kernel (GotoBLAS-style;
    kernels/gemm.py), which sums into an fp32 ``c`` (for 16-bit results a scratch one, rounded
    into ``c`` by convert_kernel at the end: rounding at every k slice would lose precision)."""
    if _dot_bf16(a, b, c):
        return
    M, K = a.shape
    N = b.shape[1]
    cfg = PACKED_CONFIGS[lower_generic.VECTOR_BYTES]
    bm, bn = cfg["BM"], cfg["BN"]
    strip = cdiv(K, cfg["BK"]) * cfg["BK"] <= STRIP_MAX_K
    kc = cfg["BK"] if strip else _k_slice(K, cfg["KC"], cfg["BK"])
    kp = cdiv(K, kc) * kc
    panels = cdiv(N, bn)
    # gemm_packed_kernel: whole MC blocks of strips; the last block's strips past M are zeros in
    # apt, so every microkernel takes the in-bounds path (a strip past apt's end took the masked
    # k loop over all of K, ~10x slower per k: 1024^3 52 -> 67 GFLOP per CPU-second; its c rows
    # are not stored)
    strips = cdiv(M, bm) if strip else cdiv(M, cfg["MC"]) * (cfg["MC"] // bm)
    bp = _scratch("pack", panels * kp, bn, np.float32)
    # a row-major copy, rows one cache line longer than kp: the BM rows of a strip are BM streams
    # that would share L1 sets at a pitch of a multiple of 4 KB
    apt = _scratch("pack_a", strips * bm, kp, np.float32, pitch=kp + 16)
    pack_b_kernel[(kp // cfg["BKP_B"],)](b, bp, N, kp, BKP=cfg["BKP_B"], BN=bn)
    pack_a_kernel[(strips,)](a, apt, kp, BM=bm, BKP=cfg["BKP_A"])
    c32 = c if _dtype_name(c) == "float32" else _scratch("pack_c", M, N, np.float32)
    nc = STRIP_NC if strip else cfg["NC"]
    for n0, width, blocks in _column_blocks(N, nc, bn):
        if strip:
            gemm_strip_kernel[(strips, blocks)](apt, bp, c32, M, N, K, kp, n0, width, BM=bm, BN=bn, BK=cfg["BK"])
        else:
            gemm_packed_kernel[(cdiv(M, cfg["MC"]), blocks)](
                apt, bp, c32, M, N, K, kp, cfg["MC"], n0, width, kc, BM=bm, BN=bn, BK=cfg["BK"])
    if c32 is not c:
        convert_kernel[(cdiv(M, 8),)](c32, c, N, BR=8, BC=64)


#: GEMMs with a column-major b (``x @ w.T``) of up to this many rows take the dot-product
#: kernels that read b in place (:func:`_bt_applies`). Before, 1-8 rows took the tuned GEMM
#: reading b's columns as gathers and more rows a row-major copy of b every call; µs a call, 2048
#: x 2048 b, one process, before -> after: fp32 M = 1 6074 -> 336, 8 4232 -> 948, 32 31991 ->
#: 2607, 64 11056 -> 4249, 256 19654 -> 13448; bf16 (torch: 238, 330, 969, -, 5361) M = 1 6169
#: -> 152, 8 4463 -> 405, 32 4134 -> 1569, 256 8471 -> 7275.
_BT_MAX_M = 256


def _bt_applies(a: Any, b: Any, c: Any) -> bool:
    """fp32 or bf16 (where the CPU has bf16 dot products) ``a @ b`` of up to _BT_MAX_M rows with a
    column-major ``b`` into a host-visible result on the CPU device."""
    M, K = a.shape
    if M > _BT_MAX_M or K < 2 or _strides(b)[0] != 1:
        return False
    name = _one_float_dtype(a, b, c)
    if name is None or not _explicit_simd_result(c):
        return False
    return cpu_simd_gemm.available() if name == "bfloat16" else cpu_simd_gemm.fma_available()


def _one_float_dtype(a: Any, b: Any, c: Any) -> str | None:
    """The dtype name of operands and result that are all float32 or all bfloat16, else None
    (the dtypes of the explicit-SIMD kernels that take both)."""
    name = _dtype_name(a)
    if name not in ("float32", "bfloat16") or _dtype_name(b) != name or _dtype_name(c) != name:
        return None
    return name


def _host_views(a: Any, b: Any, c: Any, unit: tuple[int | None, ...]) -> tuple | None:
    """``a``, ``b``, ``c`` as numpy arrays (torch CPU tensors through their views) when all three
    are host arrays and each has a unit stride along axis ``unit[i]`` (None: any strides), for an
    explicit-SIMD kernel, which takes addresses and pitches; else None."""
    views = numpy_view(a), numpy_view(b), numpy_view(c)
    if any(type(x) is not np.ndarray or ax is not None and x.strides[ax] != x.itemsize
           for x, ax in zip(views, unit)):
        return None
    return views


def _gemv_simd_applies(a: Any, b: Any, c: Any) -> bool:
    """An fp32 or bf16 decode step (M up to the explicit-SIMD GEMV's rows, a large row-major b)
    into a host-visible result on the CPU device: codegen/cpu_gemv.py's kernel, which reads b in
    sequential row streams (the skinny gemv_kernel keeps the other dtypes, epilogues and more
    rows). Kernel alone, 1x2048x2048 fp32, 15 alternating series, one process: 146 us against
    157 for gemv_kernel (per-series ratio 0.91); no host sum (the kernel adds its slices), and
    a repeated call goes from its recipe to ``cpu_simd_gemm.gemv`` (docs/compiler.md)."""
    M, K = a.shape
    N = b.shape[1]
    if M > max(cpu_gemv.ROWS) or K * N < _GEMV_MIN_ELEMENTS or _strides(b)[1] != 1:
        return False
    return _one_float_dtype(a, b, c) is not None and _explicit_simd_result(c) and cpu_simd_gemm.fma_available()


def _gemv_simd(a: Any, b: Any, c: Any) -> bool:
    """``c = a @ b`` by ``cpu_simd_gemm.gemv`` where the operands are host arrays (numpy, or torch
    CPU tensors through their views) with unit column strides for ``a`` and ``b``; False (nothing
    done) otherwise."""
    views = _host_views(a, b, c, (1, 1, None))   # (any c: gemv copies a strided one)
    if views is None:
        return False
    cpu_simd_gemm.gemv(*views)
    return True


def _explicit_simd_result(c: Any) -> bool:
    """Whether a result may come from the CPU device's explicit-SIMD kernels (codegen/
    cpu_simd.py): written by the host's addresses (not a USM device array, not a torch
    tensor off the CPU), on a target without DPAS, not under the interpreter."""
    if _interpreting() or _is_usm(c) or (_is_torch(c) and c.device.type != "cpu"):
        return False
    return not get_target(current_target()).has_dpas


def _gemm_bt(a: Any, b: Any, c: Any) -> bool:
    """``c = a @ b`` by ``cpu_simd_gemm.gemm_bt`` where the operands are host arrays (numpy, or
    torch CPU tensors through their views) with unit column strides for ``a`` and ``c``; False
    (nothing done) otherwise."""
    views = _host_views(a, b, c, (1, 0, 1))
    if views is None:
        return False
    cpu_simd_gemm.gemm_bt(*views)
    return True


#: bf16 GEMMs of at least this many rows take the bf16 dot-product kernels where the CPU device
#: has them (:func:`_dot_bf16_applies`). Against the skinny kernel, b row-major and read in place
#: (dot_bf16_gemm_rows), µs a call, one process, quiet VM, M x (2048x2048 / 4096x1024 /
#: 1024x4096): M=1 221 / 355 / 339 skinny against 378 / 663 / 375; M=2 274 / 294 / 284 against
#: 400 / 420 / 343; M=3 514 / 408 / 466 against 471 / 379 / 372; M=8 847 / 978 / 742 against
#: 432 / 391 / 351.
_DOT_BF16_MIN_M = 3


def _dot_bf16_applies(a: Any, b: Any, c: Any) -> bool:
    """A bf16 GEMM of _DOT_BF16_MIN_M or more rows (up to GEMV_MAX_M only with a row-major b
    whose N is a multiple of the in-place kernel's panel) into a host-visible bf16 result, of
    any size, where the CPU device has bf16 dot products: the kernels of :func:`_dot_bf16` are
    faster than the tuned GEMM and the packed fp32 kernels at every size measured, from
    128x128x512 (xejit.matmul, torch CPU tensors, quiet VM, µs a call: 238 tuned -> ~100) to
    2048^3 (86 -> 40 ms), than the skinny kernel's row blocks for batches (32x2048x2048 4.2 ->
    1.1-1.7 ms; torch 5.3) and than the skinny kernel from 3 rows (_DOT_BF16_MIN_M); and they
    need no autotuning."""
    M = a.shape[0]
    if M < _DOT_BF16_MIN_M or any(_dtype_name(x) != "bfloat16" for x in (a, b, c)):
        return False
    if M <= GEMV_MAX_M and (_strides(b)[1] != 1 or b.shape[1] % cpu_bf16_dot.ROWS_NR):
        return False   # (packing b would cost more than the skinny kernel's call)
    return _explicit_simd_result(c) and cpu_simd_gemm.available()


def _dot_bf16(a: Any, b: Any, c: Any) -> bool:
    """``c = a @ b`` by the CPU's bf16 dot products (``xejit.cpu_simd_gemm``) where the device has
    them and the operands are bf16 host arrays (numpy, or torch CPU tensors through their views)
    with unit column strides for ``a`` and ``c``; False (nothing done) otherwise (also the
    check of a remembered "packed" recipe: :func:`_packed` calls it first). Against the packed
    fp32 kernels, which widen bf16 to fp32: 2048^3 199 -> 411-427 GFLOP/s (torch 409-418 in the
    same runs; benchmarks/run.py, docs/autotune-and-matmul.md)."""
    if any(_dtype_name(x) != "bfloat16" for x in (a, b, c)) or not cpu_simd_gemm.available():
        return False
    views = _host_views(a, b, c, (1, None, 1))
    if views is None:
        return False
    cpu_simd_gemm.gemm(*views)
    return True


def _k_slice(K: int, kc: int, bk: int) -> int:
    """gemm_packed_kernel's k slice for a K: about ``kc`` deep, a multiple of ``bk``, as few
    slices as K needs at ``kc`` or one more, whichever pads K the least (K = 1027 in slices of 256
    is 1280 deep, of 192 1152)."""
    n = cdiv(K, kc)
    return min((cdiv(cdiv(K, s), bk) * bk for s in (n, n + 1)), key=lambda d: (cdiv(K, d) * d, -d))


def _column_blocks(N: int, nc: int, bn: int) -> list[tuple[int, int, int]]:
    """The packed kernels' launches over N columns in blocks of ``nc``: (first column, block
    width, blocks) for the whole blocks, then one narrower block (whole BN panels) for the rest.
    A whole last block would run its microkernels past b's last panel, on the masked path over
    all of K: 4000x288x700 took 2.3x the time of 4000x256x700."""
    whole = N // nc
    out = [(0, nc, whole)] if whole else []
    if N % nc:
        out.append((whole * nc, cdiv(N % nc, bn) * bn, 1))
    return out


_PAD_BYTES = 64


#: ... when A has at least this many rows: the copy must be small next to the GEMM (measured with
#: the copy: 512^3 69.5 padded vs 79.0 not, 64x2048x2048 27.5 vs 42.2; 1024^3 97.5 vs 49.1).
_PAD_MIN_ROWS = 1024


def _b_for_gemm(b: Any, m: int) -> Any:
    """B as the tuned GEMM streams it best on this target: :func:`_row_major_b`, then
    :func:`_padded_pitch`."""
    return _padded_pitch(_row_major_b(b, m), m)


def _row_major_b(b: Any, m: int) -> Any:
    """A column-major B (``x @ w.T``) copied once into a row-major buffer, on targets without 2D
    block IO (the CPU device), for an A of more than GEMV_MAX_M rows.

    There the kernel reads a row of a column-major B tile as per-lane gathers (one element per
    cache line): fp32 512^3 5-13 GFLOP/s against 80-115 for a row-major B. The copy costs K*N
    elements of memory traffic, small next to the M*N*K GEMM once M is past a handful of rows."""
    if m <= GEMV_MAX_M or _is_usm(b):
        return b
    K, N = b.shape
    s0, s1 = _strides(b)
    # (the layout first: a row-major B, the usual one, returns before the ~10 us of looking the
    # target up, on every call of a cached shape)
    if s1 == 1 or s0 != 1 or K < 16 or N < 16 or _interpreting() or get_target(current_target()).has_block_io:
        return b
    if _is_torch(b):
        if b.device.type != "cpu":
            return b
        return b.contiguous()
    buf = usm.empty((K, N), b.dtype)
    buf[...] = b
    return buf


def _padded_pitch(b: Any, m: int) -> Any:
    """A row-major B whose row pitch is a multiple of the target's ``conflict_pitch_bytes`` (2 KB on
    the CPU device, target ``generic``) is copied once into a buffer whose rows are 64 bytes
    longer, for an A of ``m`` >= 1024 rows.

    Each workgroup streams a B panel (BN columns, all K rows); at such pitches its rows map to
    a few cache sets and are evicted before the next workgroup reuses them -- what BLAS avoids by
    packing B. Measured through ``xejit.matmul`` with the copy, fp32: 1024^3 45.7 -> 78.2 GFLOP/s,
    2048^3 46.8 -> 92.2 (numpy 182-189 in the same runs). The copy costs K*N elements of memory
    traffic and a USM allocation: not worth it for fewer rows of A.
    """
    if m < _PAD_MIN_ROWS or _interpreting() or _is_usm(b):   # (device memory: no host-staged copy)
        return b
    conflict = get_target(current_target()).conflict_pitch_bytes
    K, N = b.shape
    it = b.element_size() if _is_torch(b) else b.itemsize
    s0, s1 = _strides(b)
    if conflict is None or s1 != 1 or K < 64 or N < 64 or (s0 * it) % conflict:
        return b
    pad = _PAD_BYTES // it
    if _is_torch(b):
        import torch
        buf = torch.empty((K, N + pad), dtype=b.dtype, device=b.device)
        buf[:, :N].copy_(b)
    else:
        buf = usm.empty((K, N + pad), b.dtype)
        buf[:, :N] = b
    return buf[:, :N]


def _activate(z: np.ndarray, activation: str | None) -> np.ndarray:
    """The kernel's epilogue in numpy (float64): NaN stays NaN through relu, as in torch."""
    if activation == "relu":
        return np.where(z < 0, 0.0, z)
    if activation == "gelu_tanh":
        return 0.5 * z * (1.0 + np.tanh(0.7978845608028654 * (z + 0.044715 * z * z * z)))
    return z


def _host_values(x: Any) -> np.ndarray:
    """A float64 host copy of an array's values."""
    if _is_torch(x):
        return x.float().cpu().numpy().astype(np.float64)
    if _is_usm(x):
        v = x.to_numpy()
        if x.dtype == "bfloat16":
            v = bf16_bits_to_f32(v)
        return v.astype(np.float64)
    return np.asarray(x, np.float64)


def _write(dst: Any, values: np.ndarray) -> None:
    if _is_usm(dst):
        if dst.dtype == "bfloat16":
            dst.copy_from_host(f32_to_bf16_bits(values.astype(np.float32)))
        else:
            dst.copy_from_host(values.astype(dst.dtype))
        return
    if _is_torch(dst):
        import torch
        dst.copy_(torch.from_numpy(np.ascontiguousarray(values)).to(dst.dtype))
    else:
        dst[...] = values.astype(dst.dtype)


def _copy_into(dst: Any, src: Any) -> None:
    if _is_usm(dst):
        dst.copy_from_host(src.to_numpy())
        return
    if _is_torch(dst):
        dst.copy_(src)
    else:
        dst[...] = src


# --- the entry point ---------------------------------------------------------------------------

def matmul(a: Any, b: Any, *, bias: Any = None, activation: str | None = None, out: Any = None) -> Any:
    """``activation(a @ b + bias)`` with ``torch.matmul``'s shape rules; see the module docstring.

    Raises:
        MatmulError: what ``torch.matmul`` raises a ``RuntimeError`` for (shapes that do not match,
            batch dimensions that do not broadcast, mixed dtypes, a 0-d operand, a wrong ``out=``
            shape or dtype, a bias of the wrong shape or dtype); also a ``ValueError``.
        XejitTypeError: an operand, ``bias`` or ``out=`` that is not an array of the operands' kind
            (``out=[...]``), an unsupported dtype.
        XejitValueError: an unknown activation, a read-only ``out=``.
        All are ``XejitError``s; messages name the operands' dtypes and shapes.
    """
    # Plain numpy operands first (neither torch tensors nor device objects: the branches below
    # would not take them), so that a repeated call pays for no other test (out= too: a decode
    # loop's; its checks took ~45 us a call, 1x256x256 on the CPU device).
    if bias is None and type(a) is np.ndarray and type(b) is np.ndarray and (out is None or type(out) is np.ndarray) \
            and a.ndim == 2 and b.ndim == 2 and (activation is None or activation in ACTIVATIONS):
        key = _recipe_key(a, b, activation, out)
        c = _fast_matmul(a, b, activation, out, key)   # the dtypes, shapes and strides of an earlier call
        if c is not None:
            return c
        return _matmul(a, b, None, activation, out, recipe=key)
    if _is_torch(a) or _is_torch(b):
        if not (_is_torch(a) and _is_torch(b)):
            raise XejitTypeError(f"xejit.matmul: a ({type(a).__name__}) and b ({type(b).__name__}) must both "
                             f"be torch tensors or both arrays")
        for name, x in (("bias", bias), ("out", out)):
            if x is not None and not _is_torch(x):
                raise XejitTypeError(f"xejit.matmul: {name} is a {type(x).__name__}; with torch tensors a and "
                                     f"b it must be a torch tensor too")
        _check_torch_devices(a, b, bias, out)
        plain = _plain_torch_call(a, b, bias, out)
        if plain and bias is None:
            c = _through_numpy_views(a, b, activation, out)
            if c is not None:
                return c
        if out is None:
            if plain:   # (the op would add only its dispatch: ~40 us a call)
                return _matmul(a, b, bias, activation, None)
            from .torch_ops import matmul_op  # registers torch.ops.xejit.matmul on first use
            return matmul_op(a, b, bias, _activation(activation, a))
        if any(t is not None and t.requires_grad for t in (a, b, bias)) and __import__("torch").is_grad_enabled():
            raise MatmulError("xejit.matmul: out= does not support autograd; call it without out= "
                             "or under torch.no_grad()")
        return _matmul(a, b, bias, activation, out)
    if any(x is not None and is_device_object(x) for x in (a, b, bias, out)):
        # arrays in SYCL USM memory (DLPack oneAPI, SUAI): views of the caller's memory, no copy
        given = [(n, x) for n, x in (("a", a), ("b", b), ("bias", bias), ("out", out)) if x is not None]
        dev_name = next(n for n, x in given if is_device_object(x))
        args = {}
        for name, x in given:
            u = from_object(x, f"xejit.matmul: {name}") if is_device_object(x) else _usm_numpy_view(x)
            if u is None:
                raise XejitValueError(f"xejit.matmul: {name} ({type(x).__name__}) is a host array but {dev_name} "
                                      f"({type(dict(given)[dev_name]).__name__}) is SYCL device memory: mixed "
                                      f"devices; pass arrays of one device")
            args[name] = u
        first = args["a"].queue
        for name, u in args.items():
            if u.queue.sycl_device != first.sycl_device or u.queue.sycl_context != first.sycl_context:
                raise XejitValueError(f"xejit.matmul: {name} is on {u.queue.sycl_device.filter_string} but a is on "
                                      f"{first.sycl_device.filter_string}: mixed devices (or SYCL contexts)")
        res = _matmul(args["a"], args["b"], args.get("bias"), activation, args.get("out"))
        return out if out is not None else _to_caller_kind(res, a)
    return _matmul(_as_array(a, "a"), _as_array(b, "b"),
                   None if bias is None else _as_array(bias, "bias"), activation, out)


def _plain_torch_call(a: Any, b: Any, bias: Any, out: Any) -> bool:
    """Torch CPU tensors (no subclass) that need neither the custom op's autograd (an operand
    requiring grad with grad enabled) nor its ``torch.compile`` / torch function or dispatch
    mode support: xejit computes them directly."""
    import torch
    if any(x is not None and not is_plain_tensor(x) for x in (a, b, bias, out)) or a.device.type != "cpu":
        return False
    if torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in (a, b, bias)):
        return False
    return not (torch.compiler.is_compiling() or torch._C._is_torch_function_mode_enabled()
                or torch._C._len_torch_dispatch_stack())


def _through_numpy_views(a: Any, b: Any, activation: str | None, out: Any) -> Any:
    """``xejit.matmul`` of 2D torch CPU tensors numpy can view (bfloat16 as ml_dtypes'), a plain
    call (:func:`_plain_torch_call`), through the numpy path and its remembered choices
    (:func:`_fast_matmul`), the result a tensor on the same memory; None for other operands or
    mixed dtypes (the torch path's error names them). A decode call took the custom op's
    dispatch and the full checks: 1x256x256 fp32 226 us against 18 for numpy arrays."""
    if a.ndim != 2 or b.ndim != 2 or a.dtype != b.dtype:
        return None
    na, nb = numpy_view(a), numpy_view(b)
    no = None if out is None else numpy_view(out)
    if type(na) is not np.ndarray or type(nb) is not np.ndarray or (out is not None and type(no) is not np.ndarray):
        return None
    c = matmul(na, nb, activation=activation, out=no)
    return out if out is not None else as_tensor(c)


def _usm_numpy_view(x: Any) -> Any:
    """A numpy array backed by dpctl USM memory (``xejit.runtime.usm``) as a UsmArray view, else None."""
    if not isinstance(x, np.ndarray) or x.dtype.name not in _SUPPORTED + ("int32",):
        return None
    owner = _usm_owner(x)
    if owner is None:
        return None
    return UsmArray(x.__array_interface__["data"][0], x.shape, x.strides, x.dtype.name, owner.sycl_queue,
                    owner=x, read_only=not x.flags.writeable, source="numpy", origin=x)


def _check_torch_devices(*tensors: Any) -> None:
    """Operands, bias and out= on one torch device (a CPU tensor beside an XPU one is an error)."""
    named = [(n, t) for n, t in zip(("a", "b", "bias", "out"), tensors) if t is not None and _is_torch(t)]
    dev = named[0][1].device
    for n, t in named[1:]:
        if t.device != dev:
            raise MatmulError(f"xejit.matmul: {n} is on {t.device} but a is on {dev}: mixed devices; "
                              f"move the tensors to one device")


def _to_caller_kind(result: Any, proto: Any) -> Any:
    """A result in USM memory returned as the caller's kind: through the array API namespace's
    ``from_dlpack`` of the caller's array (dpctl.tensor, dpnp, ...: no copy, same device), else the
    :class:`~xejit.runtime.usm_array.UsmArray` itself (it exports ``__dlpack__`` and SUAI)."""
    if _is_usm(proto) or not hasattr(proto, "__array_namespace__"):
        return result
    xp = proto.__array_namespace__()
    return xp.from_dlpack(result) if hasattr(xp, "from_dlpack") else result


def _as_array(x: Any, name: str) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    try:
        return np.asarray(x)
    except Exception:
        raise XejitTypeError(f"xejit.matmul: {name} of type {type(x).__name__} is not an array") from None


def _activation(activation: str | None, a: Any) -> str | None:
    act = _ACT_ALIASES.get(activation, activation) if isinstance(activation, str) else activation
    if act is not None and act not in ACTIVATIONS:
        raise XejitValueError(f"xejit.matmul: unknown activation {activation!r}; expected one of "
                         f"{', '.join(map(repr, ACTIVATIONS))} or None")
    return act


def _result_shape_dtype(a: Any, b: Any) -> tuple[tuple[int, ...], str]:
    da, db = _dtype_name(a), _dtype_name(b)
    for name, x, d in (("a", a, da), ("b", b, db)):
        if d not in _SUPPORTED:
            raise XejitTypeError(f"xejit.matmul: {name} ({_describe(x)}) has an unsupported dtype; supported: "
                             f"{', '.join(_SUPPORTED)}")
        if x.ndim == 0:
            raise MatmulError(f"xejit.matmul: {name} is a 0-d array; both operands need at least 1 dimension")
    if da != db:
        raise MatmulError(f"xejit.matmul: a ({_describe(a)}) and b ({_describe(b)}) must have the same dtype")
    a_shape = (1,) + tuple(a.shape) if a.ndim == 1 else tuple(a.shape)
    b_shape = tuple(b.shape) + (1,) if b.ndim == 1 else tuple(b.shape)
    if a_shape[-1] != b_shape[-2]:
        raise MatmulError(f"xejit.matmul: shapes do not match: a ({_describe(a)}) has K={a_shape[-1]} "
                         f"columns but b ({_describe(b)}) has {b_shape[-2]} rows")
    batch = _broadcast(a_shape[:-2], b_shape[:-2], a, b)
    shape = batch + (a_shape[-2], b_shape[-1])
    if a.ndim == 1:
        shape = shape[:-2] + shape[-1:]
    if b.ndim == 1:
        shape = shape[:-1]
    return shape, ("int32" if da == "int8" else da)


def _matmul(a: Any, b: Any, bias: Any, activation: str | None, out: Any, recipe: tuple | None = None) -> Any:
    act = _activation(activation, a)
    shape, rdtype = _result_shape_dtype(a, b)
    if act == "gelu_tanh" and rdtype == "int32":
        raise XejitTypeError(f"xejit.matmul: activation 'gelu_tanh' needs float operands, got {_describe(a)}")
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    M, K, N = a2.shape[-2], a2.shape[-1], b2.shape[-1]
    if bias is not None:
        if _kind(bias) != _kind(a):
            raise XejitTypeError("xejit.matmul: bias must be of the same kind (torch/numpy/USM) as a and b")
        if tuple(bias.shape) not in ((N,), (1,), ()):
            raise MatmulError(f"xejit.matmul: bias ({_describe(bias)}) must have shape [{N}] (the result's "
                             f"last dimension)")
        if _dtype_name(bias) != rdtype:
            raise MatmulError(f"xejit.matmul: bias ({_describe(bias)}) must have the result dtype {rdtype}")
        if tuple(bias.shape) != (N,):
            bias = (bias.reshape(1).expand(N) if _is_torch(bias) else bias.reshape(1).broadcast_to((N,))
                    if _is_usm(bias) else np.broadcast_to(bias.reshape(1), (N,)))
        if _strides(bias)[0] != 1 and N > 1:
            bias = _contiguous(bias)
    if out is None:
        out = _empty_like_kind(a, shape, rdtype)
    else:
        if _kind(out) != _kind(a) or not (_is_torch(out) or _is_usm(out) or isinstance(out, np.ndarray)):
            raise XejitTypeError(f"xejit.matmul: out ({type(out).__name__}) must be an array of the same kind "
                                 f"as a and b ({type(a).__name__})")
        if tuple(out.shape) != shape or _dtype_name(out) != rdtype:
            raise MatmulError(f"xejit.matmul: out ({_describe(out)}) must be {rdtype} {list(shape)} for "
                              f"a ({_describe(a)}) @ b ({_describe(b)})")
        if _is_usm(out) and out.read_only or not _is_torch(out) and not _is_usm(out) and not out.flags.writeable:
            raise XejitValueError(f"xejit.matmul: out ({_describe(out)}) is read-only")
        if 0 not in out.shape and (any(st == 0 and n > 1 for n, st in zip(out.shape, _strides(out))) or
                                   (not _is_torch(out) and not _distinct_elements(out))):
            raise MatmulError(f"xejit.matmul: out ({_describe(out)}, strides {list(_strides(out))}) has "
                              f"elements that share memory; pass an out= without repeated elements")
        if 0 not in out.shape and any(x is not None and _overlaps(out, x) for x in (a, b, bias)):
            # out= aliases an input: compute into a new array, then copy (as torch.matmul does)
            _copy_into(out, _matmul(a, b, bias, activation, None))
            return out
    if 0 in out.shape:
        return out
    # The result viewed with explicit [batch..., M, N] dimensions (1-D operands restored).
    c_full = out
    if b.ndim == 1:
        c_full = c_full[..., None]
    if a.ndim == 1:
        c_full = c_full[..., None, :]
    batch = tuple(c_full.shape[:-2])
    acc = _acc_type(rdtype)

    # One launch when b is shared by the whole batch and a / c collapse to [rows, cols].
    b_batch = tuple(b2.shape[:-2])
    if batch and all(s == 1 for s in b_batch):
        b_mat = b2.reshape(b2.shape[-2:]) if not _is_torch(b2) else b2.reshape(b2.shape[-2], b2.shape[-1])
        a_full = _expand(a2, batch + (M, K))
        a_rows = _collapse_rows(a_full, K)
        c_rows = _collapse_rows(c_full, N)
        if a_rows is not None and c_rows is not None and _is_2d_ok(b_mat):
            _launch(a_rows, b_mat, bias, c_rows, acc, act)
            return out
    a_full, b_full = _expand(a2, batch + (M, K)), _expand(b2, batch + (K, N))
    for idx in itertools.product(*(range(s) for s in batch)):
        # (no batch: the arrays themselves, not x[()] views, so a relaunch knows them: launch_plan)
        ai, bi, ci = (a_full[idx], b_full[idx], c_full[idx]) if idx else (a_full, b_full, c_full)
        ai = ai if _is_2d_ok(ai) else _contiguous(ai)
        bi = bi if _is_2d_ok(bi) else _contiguous(bi)
        if _is_2d_ok(ci):
            _launch(ai, bi, bias, ci, acc, act, recipe if not batch and ai is a and bi is b else None)
        else:
            tmp = _contiguous(ci)
            _launch(ai, bi, bias, tmp, acc, act)
            _copy_into(ci, tmp)
    return out


def _expand(x: Any, shape: tuple[int, ...]) -> Any:
    if tuple(x.shape) == shape:
        return x
    if _is_torch(x):
        return x.expand(shape)
    if _is_usm(x):
        return x.broadcast_to(shape)
    return np.broadcast_to(x, shape)


def _acc_type(rdtype: str):
    return xl.int32 if rdtype == "int32" else xl.float32
