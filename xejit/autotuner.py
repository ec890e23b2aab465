"""``@xejit.autotune``: pick the fastest :class:`Config` of a kernel per key, on the device.

For each new value of the key (the named arguments' values, plus the dtype and layout of every
array argument), the autotuner

1. prunes configs that cannot fit the current target (registers, SLM, workgroup size, DPAS and
   2D block shapes, as estimated by the ``resources`` model) and reports why,
2. applies the user's ``prune_configs_by`` (``early_config_prune``, ``perf_model`` + ``top_k``),
3. runs every remaining config: ``warmup`` ms of warm-up, then ``rep`` ms of timed runs (at least
   ``min_reps``), each followed by a device synchronization; arguments named in
   ``restore_value`` are restored (``reset_to_zero`` ones zeroed) before every run, and once
   more after tuning, so the user's launch sees the original inputs,
4. keeps the config with the smallest median time in memory and on disk (``xejit.runtime.cache``
   under ``XEJIT_CACHE_DIR``, atomic writes) keyed by (kernel source, key values, configs,
   device, backend, xejit version), so a new process reuses the choice without re-tuning.

``XEJIT_PRINT_AUTOTUNING=1`` prints each choice (and pruned configs). A tqdm progress bar appears
when tuning takes longer than a second on a terminal.

Example:
    >>> import numpy as np, xejit, xejit.language as xl
    >>> @xejit.autotune(configs=[xejit.Config({"BN": 4}), xejit.Config({"BN": 8})], key=["n"],
    ...                 warmup=0, rep=0, cache_results=False)
    ... @xejit.kernel(interpret=True)
    ... def add1(x, y, n, BN: xl.constexpr):
    ...     t = xl.load_tile(xl.init_tile(x, [0, xl.program_id(0) * BN], [1, BN]))
    ...     xl.store_tile(xl.init_tile(y, [0, xl.program_id(0) * BN], [1, BN]), t + 1.0)
    >>> x = np.arange(8, dtype=np.float32); y = np.zeros_like(x)
    >>> add1[lambda meta: (xejit.cdiv(8, meta["BN"]),)](x, y, 8); y.tolist()
    [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    >>> add1.best_config.kwargs["BN"] in (4, 8)
    True
"""
from __future__ import annotations

import functools
import json
import math
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from . import options
from .errors import XejitError
from ._version import __version__
from .arguments import ArraySpec, array_facts, memory_order, specialize_arg
from .codegen.block_read_costs import kstep_costs
from .codegen.decode_slm import decode_a_staged, decode_spread_staged, staged_slm_bytes
from .codegen.intel_compiler import find_toolchain
from .codegen.lower_xegpu import _DEFERRED_LANE_ROW_WORDS, LANE_ROWS_AHEAD
from .codegen.parity_dpas import live_operand_registers, parity_mode, spreads_kept, ways
from .codegen.passes import pipelining
from .codegen.passes.blocking import operand_plan
from .codegen.passes.layout_propagation import mma_layout
from .codegen.targets import check_block_shape, get_target
from .device_launch import resolve_target
from .ir.core import ArrayType, ScalarType, f32, scalar_type_from_numpy
from .runtime import default_device
from .runtime.cache import default_cache, key_of
from .runtime.usm_array import UsmArray

__all__ = ["Config", "Autotuner", "autotune", "TuningRecord", "do_bench", "gemm_resources",
           "estimate_gemm", "current_target", "OPTION_NAMES"]

OPTION_NAMES = ("num_subgroups", "num_stages", "grf_mode")


class Config:
    """One candidate: constexpr values (``kwargs``) and launch options.

    ``num_subgroups`` (like Triton's ``num_warps``), ``num_stages`` (prefetch distance in
    k-steps) and ``grf_mode`` (``"default"``, ``"256"``, ``"auto"``) are passed to the kernel
    beside the constexprs. ``pre_hook(named_args)`` runs before each launch with this config.
    """

    __slots__ = ("kwargs", "num_subgroups", "num_stages", "grf_mode", "pre_hook")

    def __init__(self, kwargs: dict[str, Any], num_subgroups: int | None = None, num_stages: int = 3,
                 grf_mode: str = "default", pre_hook: Callable | None = None):
        self.kwargs = dict(kwargs)
        self.num_subgroups = num_subgroups
        self.num_stages = num_stages
        self.grf_mode = grf_mode
        self.pre_hook = pre_hook

    def all_kwargs(self) -> dict[str, Any]:
        """The constexprs and the launch options, as passed to ``kernel[grid](...)``."""
        opts = {"num_subgroups": self.num_subgroups, "num_stages": self.num_stages,
                "grf_mode": self.grf_mode}
        return {**self.kwargs, **{k: v for k, v in opts.items() if v is not None}}

    def to_dict(self) -> dict[str, Any]:
        return {"kwargs": {k: _jsonable(v) for k, v in self.kwargs.items()},
                "num_subgroups": self.num_subgroups, "num_stages": self.num_stages,
                "grf_mode": self.grf_mode}

    def _identity(self) -> tuple:
        return (tuple(sorted((k, repr(v)) for k, v in self.kwargs.items())), self.num_subgroups,
                self.num_stages, self.grf_mode)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Config) and self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def __repr__(self) -> str:
        parts = [f"{k}: {v!r}" for k, v in self.kwargs.items()]
        parts += [f"num_subgroups: {self.num_subgroups}", f"num_stages: {self.num_stages}",
                  f"grf_mode: {self.grf_mode!r}"]
        return "Config(" + ", ".join(parts) + ")"


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return repr(v)


# --- timing -----------------------------------------------------------------------------------

def do_bench(fn: Callable[[], Any], *, warmup: float = 25.0, rep: float = 100.0, min_reps: int = 3,
             max_reps: int = 1000, setup: Callable[[], Any] | None = None,
             sync: Callable[[], Any] | None = None) -> list[float]:
    """Per-run times in seconds of ``fn`` after ``warmup`` ms of warm-up (at least one run), for
    ``rep`` ms (at least ``min_reps`` runs). ``setup`` runs untimed before each run; ``sync``
    (e.g. a queue wait) is timed with the run. The median of the result is the figure to use."""
    sync = sync or (lambda: None)
    setup = setup or (lambda: None)

    def once() -> float:
        setup()
        t0 = time.perf_counter()
        fn()
        sync()
        return time.perf_counter() - t0

    first = once()
    spent = first
    while spent < warmup / 1e3:
        spent += once()
    n = max(min_reps, min(max_reps, int(rep / 1e3 / max(first, 1e-7))))
    return [once() for _ in range(n)]


# --- static resource checks ---------------------------------------------------------------------

def current_target() -> str:
    """The target configs are checked against (``device_launch.resolve_target``)."""
    return resolve_target()[0]


def _max_workgroup_size() -> int | None:
    try:
        return int(default_device().sycl_device.max_work_group_size)
    except Exception:  # no device: nothing to check against
        return None


_DPAS_TYPE = {"bf16": "bf16", "f16": "fp16", "f32": "tf32", "i8": "int8", "u8": "uint8"}


def _elem(x: Any):
    """The xejit ScalarType of an array argument, or of a dtype-like / ScalarType value."""
    if isinstance(x, ScalarType):
        return x
    return array_facts(x)[0]


def _subgroup_layouts(n: int) -> Iterable[tuple[int, int]]:
    for sgm in range(1, n + 1):
        if n % sgm == 0:
            yield sgm, n // sgm


def _share_words(t: Any, BK: int, BN: int, nsg: int, b_bits: int) -> int:
    """32-bit words of a staged B panel (BK x BN) per work item (truncated; ``_b_staged`` checks
    that it divides)."""
    return BK * b_bits // 32 * BN // (nsg * t.subgroup_size)


def _b_staged(t: Any, BK: int, BN: int, nsg: int, sgm: int, acc_bytes: int, b_bits: int,
              col_b: bool = False) -> bool:
    """dg2 stages the B panel in SLM (``codegen/slm_staging.py``, ``slm_plan``): several subgroup
    rows share it, the accumulators take under half the register file, and the panel's 32-bit
    words split into 1, 2, 4, 8 or 16 per work item. Column-major B is not staged (the staging feeds
    the transposed k-loop, which takes row-major B; measured: colB 256x64x128/64sg, 0 B of SLM)."""
    if (t.dpas is None or t.block_io is not None or sgm < 2 or t.registers is None or b_bits not in (8, 16)
            or col_b):
        return False
    if 2 * acc_bytes >= t.registers.count * t.registers.bytes_each:
        return False
    words, lanes = BK * b_bits // 32 * BN, nsg * t.subgroup_size
    return words % lanes == 0 and words // lanes in (1, 2, 4, 8, 16) and BN % (words // lanes) == 0


def _a_staged(t: Any, BM: int, sm: int, sn: int, BK: int, k: int, a_bits: int, b_t: Any, nsg: int,
              col_b: bool) -> int | None:
    """dg2 decode's A staged in SLM by the workgroup (``codegen/decode_slm.py``): column-major
    B's A panel (words a work item), or by column parity the A^T spread (words of A's row a work
    item)."""
    if col_b:
        return decode_a_staged(BM, sm, BK, a_bits, nsg, t.subgroup_size)
    if parity_mode(sm, sn // t.dpas.n, b_t.bitwidth, b_t.is_int, staged=True):
        return decode_spread_staged(BM, sm, BK, k, nsg, t.subgroup_size, b_t.bitwidth)
    return None


def _by_parity(t: Any, BM: int, sm: int, sn: int, BK: int, k: int, a_t: Any, b_t: Any, nsg: int,
               col_b: bool) -> bool:
    """dg2's row-major B read unpacked by column parity (``codegen/parity_dpas.parity_mode``, the
    A^T spread staged where ``decode_slm.py`` can)."""
    if t.block_io is not None or t.dpas is None or not k or col_b:
        return False
    staged = _a_staged(t, BM, sm, sn, BK, k, a_t.bitwidth, b_t, nsg, col_b)
    return parity_mode(sm, sn // t.dpas.n, b_t.bitwidth, b_t.is_int, bool(staged)) is not None


def decode_b_kstep_limit(t: Any, grf_mode: str) -> int:
    """The most bytes of B a k-step of a decode tile (one DPAS row block) takes on ``t`` with 2D
    block IO: half the register file (a calibration on Intel's compiler, not a resource limit).

    Each B block there feeds one DPAS and the compiler issues the k-step's B loads ahead of their
    DPAS; B's k-step at half the file spreads the loop's fixed cost widest, over it loads wait
    for registers the DPAS free or spill (benchmarks/bench_device_code.py, hot-loop instructions
    per DPAS, pvc / bmg; 8 KB of B in 256 registers: fp16 8x64 tiles BK=64 row-major 2.88 / 2.56,
    column-major 4.56 / 3.44, int8 BK=128 2.88 / 2.5 and 4.56 / 3.44; 8x128 tiles, fp16 BK=32 and
    int8 BK=64 2.75 / 2.5 (int8 2.44) and 4.31 / 3.12, the picks; 16 KB: fp16 8x64 BK=128 3.72 /
    2.66, column-major 6.16 (64 B spill) / 4.09, tf32 8x64 BK=64 row-major 3.75 / 2.69; 32 KB:
    tf32 BK=128 spills 26.9 / 25.3 KB; in 128 registers, tf32 column-major 8x32 tiles at BK=64,
    8 KB: bmg ~30 syncs for 16 DPAS, 4.56, docs/compiler.md).
    Below it the fixed cost weighs on fewer DPAS (int8 8x64 tiles BK=64: 3.5 / 2.88, column-major
    5.12 / 3.88), which the perf model sees (``matmul._perf_model``)."""
    rf = t.registers
    large = rf.large_grf_count if grf_mode in ("256", "auto") and rf.large_grf_count else None
    return (large or rf.count) * rf.bytes_each // 2


def estimate_gemm(target: Any, BM: int, BN: int, BK: int, num_subgroups: int | None, grf_mode: str,
                  a_type: Any, b_type: Any, c_type: Any, acc_type: Any,
                  precision: str | None = None) -> dict[str, Any]:
    """Per-subgroup resources of a BM x BN x BK GEMM workgroup tile on ``target``.

    The subgroup layout is the split of ``num_subgroups`` over (M, N) that divides the tile and
    needs the fewest bytes; a subgroup holds its accumulator block and one k-step of its A and B
    operand blocks in registers (32 rows of K of 16/32-bit operands on targets with 2D block IO).
    ``precision`` is the GEMM's ``input_precision``: fp32 operands go through DPAS (as tf32) only
    with ``"tf32"``, else they run on FMA. Returns ``{"sg_layout", "sg_tile", "bytes", "registers", "register_limit", "slm_bytes",
    "problems": [reasons the config cannot fit]}``; with DPAS and 2D block IO also the k-step's
    ``dpas_per_kstep``, ``loads_per_kstep``, ``min_loads_per_kstep`` and ``prefetches_per_kstep``
    (a subgroup's messages of the pipelining pass's cooperative prefetch, ``pipelining.plan``).
    """
    t = get_target(target) if isinstance(target, str) else target
    nsg = num_subgroups or 1
    a_t, b_t, c_t, acc_t = (_elem(x) for x in (a_type, b_type, c_type, acc_type))
    problems: list[str] = []
    # Operands live per k-step: with 2D block IO, Intel's compiler issues the 16- and 32-bit loads
    # of each 32-deep K-slice next to that slice's DPAS and reuses the registers of the slice
    # before, so about 32 rows of K of A and B are live, not the whole BK (measured with
    # benchmarks/bench_device_code.py, pvc and bmg: fp16/bf16 32x32 tiles BK=128 and 32x64 BK=64,
    # tf32 32x32 BK=64 and 128 build with 0 spill; tf32 32x64 BK=32 spills 13 KB). 8-bit operands
    # (int8 32x64 BK=64 spills) and targets without block IO keep the whole k-step, and so does
    # fp32 on FMA (pvc and bmg, BK=64: 32x32 subgroup tiles spill 6-10 KB, 8x32 tiles 2.7 KB; BK=32
    # builds with 0 spill). 8-bit operands with 2D block IO hold one 32-deep slice of A and B more
    # where the target says so (``BlockIOLimits.int8_slice_ahead``; calibrated on Intel's compiler,
    # benchmarks/bench_device_code.py: int8 64x32 tiles BK=64, 224 registers by the k-step alone,
    # spill 4.0-4.4 KB on bmg and lnl, 0 on pvc; 32x32 BK=128 and 64x32 BK=32 build with 0 spill).
    fma = a_t.name == "f32" and precision != "tf32"
    kl = min(BK, 32) if t.block_io is not None and a_t.bitwidth in (16, 32) and not fma else BK
    ahead = min(BK, 32) if t.block_io is not None and a_t.bitwidth == 8 and t.block_io.int8_slice_ahead else 0
    b_order = _array_order(b_type)
    col_b = b_order == (0, 1)   # B of a @ w.T, w stored [N, K]
    # Column-major B through transposed 2D block loads (one DPAS B block each): Intel's compiler
    # issues every B load of the k-step ahead of the DPAS, each into registers of its own, so the
    # whole BK x sn of B is live while A stays one 32-deep slice (pvc, fp16 128x128x128/16sg: 16
    # transposed loads into 16 distinct 8-register blocks, the 4 A loads into one). fp16 64x32
    # tiles at BK=64 (256x256x64/32sg): 128 + 64 + 64 of 240 registers, spill 1280 B on pvc,
    # 1600 B on bmg and lnl; at BK=32 and 32x32 tiles at BK=128 (224) they build with 0 spill.
    # tf32's column-major B follows it in the large register file only, with A one 64-byte load:
    # there Intel's compiler issues a whole k-step of one operand ahead of the DPAS (pvc 32x32
    # tiles, BK=64: A's four 32x16 loads, 128 registers, at the loop's top, B streamed at 8
    # registers a load; 8x64 tiles, BK=64: B's 32 transposed loads ahead, 3.2 KB spill), and B's
    # whole k-step plus one A load is the count that splits every config (pvc and bmg: 32x32 at
    # BK=64 224 registers, 0 spill; at BK=128 352, spill 27 KB; 8x64 at BK=64 296, pvc spill 3.2 KB).
    # In the default file it schedules loads 32 rows deep (8x32 tiles, BK=64: 7 of the k-step's 16
    # B loads ahead; 32x16 tiles at BK=32 spill 6 KB with A 32 deep counted, as below).
    large_file = grf_mode in ("256", "auto") and t.registers is not None and bool(t.registers.large_grf_count)
    tf32_col_b = col_b and t.block_io is not None and b_t.bitwidth == 32 and not fma and large_file
    kb_whole = col_b and t.block_io is not None and (b_t.bitwidth < 32 or tf32_col_b)
    op_k = t.dpas.k_of(_DPAS_TYPE.get(a_t.name, "")) if t.dpas is not None and not fma else None
    best = None
    layouts = list(_subgroup_layouts(nsg))
    if t.block_io is not None:
        # the split the compiler makes (layout propagation's anchor for tile_mma), not the one that
        # would need the fewest bytes: with column-major B's whole k-step live, 256x128x128/32sg
        # needed fewer as 64x16 tiles, but is built as 32x32 (16 loads a k-step counted, 20 made)
        lay = tuple(mma_layout(BM, BN, nsg).sg_layout)
        layouts = [lay] if lay in layouts else layouts
    for sgm, sgn in layouts:
        if BM % sgm or BN % sgn:
            continue
        sm, sn = BM // sgm, BN // sgn
        # Row-major B: one A load message of K is live, 64 bytes wide (fp16 32 deep, tf32 16: pvc
        # tf32 32x16 tiles at BK=32 build with 0 spill in 128 registers, which 32 + 64 + 32 of an A
        # 32 deep would not fit). (With column-major tf32 B the same tile spills 6 KB: 32 deep kept.)
        one_load = t.block_io is not None and a_t.bitwidth in (16, 32) and not fma and (not col_b or tf32_col_b)
        kw = min(kl, 512 // a_t.bitwidth) if one_load else kl
        # ... except decode tiles on targets with immediate block offsets, where B's loads share
        # one payload and stream next to their DPAS (tf32 8x64 tiles at BK=64: bmg / lnl / ptl
        # 0 spill, 26 of the 32 B loads ahead; pvc, a payload a load, 3.2 KB)
        whole_b = kb_whole and not (tf32_col_b and t.dpas is not None and sm <= t.dpas.max_m
                                    and t.block_io.immediate_offsets)
        kb, extra = (BK if whole_b else kl), 0
        if _b_staged(t, BK, BN, nsg, sgm, sm * sn * acc_t.itemsize, b_t.bitwidth, col_b):
            # dg2 with B staged in SLM (codegen/slm_staging.py): each K-slice's operands (64 bytes
            # of A's row, 32 rows of B) are loaded next to that slice's DPAS and dead after them
            # (fp16 and int8 16x16 tiles with BK=128 build with 0 spill, acm-g10), and the work
            # item's share of the next panel is live twice while packed: its loaded rows and its
            # words (a register a word each). acm-g10, 16x16 tiles: fp16 BK=256 (16 words) spills
            # 128 B, BK=128 (8) and int8 BK=512 (16) build with 0 spill
            kw, kb = min(BK, 512 // a_t.bitwidth), min(BK, 32)
            extra = 2 * _share_words(t, BK, BN, nsg, b_t.bitwidth) * 4 * t.subgroup_size
        elif _by_parity(t, BM, sm, sn, BK, op_k, a_t, b_t, nsg, col_b):
            # row-major B by column parity in both loop versions (codegen/parity_dpas.py; the cold
            # one makes the spread on registers): live are a K-block of A^T (the cold version's)
            # and the B rows and spreads of the order the lowering issues them in
            # (parity_dpas.live_operand_registers). acm-g10, 0 spill: int8 8x32 tiles (32 + 8 +
            # 40 of 112 registers), 8x64 (64 + 8 + 32; with the k-step's 16 spreads live 19 KB of
            # spill); fp16 / bf16 8x32 (32 + 8 + 40), 8x64 (64 + 8 + 24; 20.7 KB of spill while
            # the cold version packed B^T and was copied for the NaN rerun)
            rf, v = t.registers, ways(b_t.bitwidth)
            kept = spreads_kept(sm * sn * acc_t.itemsize // rf.bytes_each, v, BK // op_k, rf.count - rf.reserved)
            kw, kb = op_k, 0
            extra = live_operand_registers(sn // (t.dpas.n * v), v, kept) * rf.bytes_each
            if sn >= 64 and BK > 32:
                # calibrated, its cause not read in the ISA: 8x64 tiles by parity deeper than
                # 32 spill (acm-g10, M=8: fp16 / bf16 BK=64 9024 B, BK=128 18464 B; int8 BK=64
                # 30336 B, BK=128 8896 B), though the count above fits
                extra += rf.count * rf.bytes_each
        elif t.block_io is None and t.dpas is not None and op_k and col_b and sm == BM == t.dpas.max_m and \
                sn >= _DEFERRED_LANE_ROW_WORDS:
            # column-major B of wide decode tiles (8x64, the workgroup one subgroup tall): each B
            # block is read at the DPAS before its own (lower_xegpu.py, Deferred.ahead), so two
            # B blocks are live, not the k-step.
            # acm-g10, 0 spill: fp16 8x512x32/8 and 8x512x16/8, int8 8x512x32/8 (64 + 16 + 16).
            # A staged from two descriptors (BK=64 fp16): the DPAS run in K-block pairs, one
            # descriptor's A operands live (decode_slm.py; fp16 8x512x64/8 0 spill, 64 + 16 + 24)
            kb, extra = 0, (1 + max(LANE_ROWS_AHEAD)) * op_k * t.dpas.n * b_t.itemsize
            if _a_staged(t, BM, sm, sn, BK, op_k, a_t.bitwidth, b_t, nsg, col_b):
                kw = min(kw, 512 // a_t.bitwidth)
        elif t.block_io is None and t.dpas is not None and t.registers is not None and op_k and (
                (col_b and sm > t.dpas.max_m) or (not col_b and BK > op_k)):
            # DPAS without 2D block IO, B not staged: the whole k-step is live, and Intel's compiler
            # needs 16 registers more than the operands and accumulators when column-major B's A
            # spans several DPAS row blocks or row-major B^T is packed from the rows of several
            # DPAS K-blocks a k-step (transposed_dpas.py): a calibration fitted to both sides of
            # the boundary, its cause not read in the ISA. Calibrated on acm-g10
            # (benchmarks/bench_device_code.py --targets dg2 --variants rowB colB): at 112 of the
            # 112 registers fp16 colB 32x16 tiles BK=16 spill 4.9 KB, rowB 8x32 BK=32 736 B, while
            # rowB 32x16 BK=16 (one K-block) and colB 8x32 BK=32 (one row block; 2.1 KB of spill
            # while the cold version gathered B's lane rows into a buffer) build with 0 spill; at
            # 96, fp16 colB 16x16 BK=32 and int8 colB 16x16 BK=64 build with 0 spill.
            extra = 16 * t.registers.bytes_each
        # the 8-bit slice ahead is not counted for decode tiles (one DPAS row block): int8 8x128
        # tiles at BK=64, 268 registers with it, build with 0 spill on bmg / lnl / ptl
        ah = 0 if t.dpas is not None and sm <= t.dpas.max_m else ahead
        parts = (sm * sn * acc_t.itemsize, sm * (kw + ah) * a_t.itemsize, (kb + ah) * sn * b_t.itemsize,
                 extra)
        # the layout with the fewest operand bytes (the extra registers do not choose it)
        if best is None or sum(parts[:3]) < sum(best[2][:3]):
            best = ((sgm, sgn), (sm, sn), parts, (kw, kb), ah)
    out: dict[str, Any] = {"sg_layout": None, "sg_tile": None, "bytes": None, "registers": None,
                           "register_limit": None, "slm_bytes": 0, "problems": problems}
    if best is None:
        problems.append(f"{nsg} subgroups cannot split the {BM}x{BN} tile evenly")
        return out
    (sgm, sgn), (sm, sn), parts, (kl, kbl), ahead = best
    out.update(sg_layout=[sgm, sgn], sg_tile=[sm, sn], bytes=sum(parts))
    # no 2D block IO (dg2): a B panel shared by several subgroup rows is staged in SLM, two
    # BK x BN buffers (codegen/slm_staging.py)
    staged = _b_staged(t, BK, BN, nsg, sgm, sm * sn * acc_t.itemsize, b_t.bitwidth, col_b)
    slm = 2 * BK * BN * b_t.itemsize if staged else 0
    if t.block_io is None and t.dpas is not None and op_k and \
            _a_staged(t, BM, sm, sn, BK, op_k, a_t.bitwidth, b_t, nsg, col_b):
        # decode's A panel (column-major B) or A^T spread (column parity), two buffers (decode_slm.py)
        slm = staged_slm_bytes(BM, BK, op_k, a_t.bitwidth, b_t.bitwidth, col_b)
    out["slm_bytes"] = slm
    if t.slm_bytes is not None and slm > t.slm_bytes:
        problems.append(f"the staged B panel needs {slm} B of shared local memory, {t.name} has {t.slm_bytes}")
    if t.registers is not None:
        rf = t.registers
        regs = math.ceil(sum(parts) / rf.bytes_each)
        large = rf.large_grf_count if grf_mode in ("256", "auto") and rf.large_grf_count else None
        if grf_mode == "256" and rf.large_grf_count is None:
            problems.append(f"grf_mode '256' is not available on {t.name}")
        limit = (large or rf.count) - rf.reserved
        out.update(registers=regs, register_limit=limit)
        if regs > limit:
            acc_r, a_r, b_r, x_r = (math.ceil(p / rf.bytes_each) for p in parts)
            spread = _by_parity(t, BM, sm, sn, BK, op_k, a_t, b_t, nsg, col_b)
            what = "column-major B gathered" if col_b else "A^T spread" if spread else "B^T packed"
            more = f", {what}: {x_r}" if x_r else ""
            problems.append(
                f"needs ~{regs} registers per subgroup (accumulator {sm}x{sn}: {acc_r}, A {sm}x{kl + ahead}: "
                f"{a_r}, B {kbl + ahead}x{sn}: {b_r}{more}) but {t.name} leaves {limit} for tile data in grf_mode "
                f"{grf_mode!r} ({large or rf.count} less {rf.reserved} the compiler needs)")
    if fma and t.dpas is not None and sm <= t.dpas.max_m and sn >= 128:
        # a calibration, not read in the ISA: fp32 on FMA in 8x128 decode tiles spills though the
        # count above fits (8x512x16/4sg in 256 GRF: pvc 64 B, bmg 192 B; 8x64 tiles build clean)
        problems.append(f"fp32 on FMA in {sm}x{sn} subgroup tiles runs Intel's compiler out of registers "
                        f"on {t.name} (calibrated: 64-192 B of spill)")
    if staged and b_t.bitwidth == 8 and op_k and _share_words(t, BK, BN, nsg, 8) == 4 and BK // op_k >= 8:
        # a calibration, not read in the ISA: 8-bit panels of 4 words a work item (one 32-bit
        # load of each of its 4 rows) with 8 K-blocks a step spill 128 B, a fill in the hot loop
        # (int8 512x32x256/64sg, acm-g10, IGC 2.40; stored after the first K-slice as well);
        # 4 words with 4 K-blocks (256x64x128/64sg) and 8 with 8 or 16 (256x64x256, 512x32x512)
        # build with 0 spill
        problems.append(f"an 8-bit B panel of 4 words a work item over {BK // op_k} K-blocks runs Intel's "
                        f"compiler out of registers on {t.name} (calibrated: 128 B of spill)")
    if t.dpas is not None:
        op_t = _DPAS_TYPE.get(a_t.name)
        k = t.dpas.k_of(op_t) if op_t else None
        if k is not None:
            if sn % t.dpas.n:
                problems.append(f"subgroup tile N={sn} is not a multiple of the DPAS N={t.dpas.n}")
            if BK % k:
                problems.append(f"BK={BK} is not a multiple of the DPAS K={k} for {a_t.name}")
            whole = sm % t.dpas.max_m == 0 if sm >= t.dpas.max_m else sm in t.dpas.repeat_counts
            if not whole:
                problems.append(f"subgroup tile M={sm} is not made of DPAS repeat counts {t.dpas.repeat_counts}")
            if t.block_io is not None and t.registers is not None and not fma and sm <= t.dpas.max_m and \
                    BK * sn * b_t.itemsize > decode_b_kstep_limit(t, grf_mode):
                problems.append(f"a decode k-step of B of {BK * sn * b_t.itemsize} bytes, over half the register "
                                f"file: Intel's compiler syncs or spills (calibrated)")
    if t.block_io is not None:
        def block(what: str, bits: int, rows: int, cols: int, op: str, max_h: int) -> None:
            w = min(cols, 512 // bits)
            h = min(rows, max_h)
            reason = check_block_shape(t, bits, w, h, 1, op)
            if reason is None and (rows % h or cols % w):
                reason = f"{rows}x{cols} is not a whole number of {h}x{w} blocks"
            if reason:
                problems.append(f"{what} ({rows}x{cols}): {reason}")
        lim = t.block_io
        block("A block", a_t.bitwidth, sm, BK, "load", lim.max_height)
        block("B block", b_t.bitwidth, BK, sn, "load_transform" if b_t.bitwidth < 32 else "load", lim.max_height)
        block("C block", c_t.bitwidth, sm, sn, "store", lim.store_max_height)
        if k is not None and not problems and not fma:
            out.update(_kstep_messages(t, sm, sn, BK, k, a_t, b_t, b_order))
            # the pipelining pass's cooperative prefetch of the workgroup's k-step (num_stages >= 1)
            out["prefetches_per_kstep"] = pipelining.messages_per_subgroup(
                [((BM, BK), a_t.itemsize, _array_order(a_type) == (0, 1)), ((BK, BN), b_t.itemsize, col_b)],
                nsg, lim.payload_war_workaround)
    elif t.dpas is not None and op_k and not problems:
        # no 2D block IO: the block-read lowering's k-step (codegen/block_read_costs.py)
        words = _share_words(t, BK, BN, nsg, b_t.bitwidth) if staged else None
        a_staged = _a_staged(t, BM, sm, sn, BK, op_k, a_t.bitwidth, b_t, nsg, col_b)
        out.update(kstep_costs(sm, sn, BK, op_k, b_t.bitwidth, t.dpas.max_m, t.dpas.n, col_b, words, a_staged,
                               integer=b_t.is_int))
    return out


def _array_order(x: Any) -> tuple[int, ...]:
    """The memory order of a 2D array argument (row-major for a bare dtype)."""
    if isinstance(x, ScalarType) or not hasattr(x, "shape"):
        return (1, 0)
    _, shape, strides, _ = array_facts(x)
    return memory_order(shape, strides) if len(shape) == 2 else (1, 0)


def _kstep_messages(t: Any, sm: int, sn: int, BK: int, k: int, a_t: Any, b_t: Any,
                    b_order: tuple[int, ...]) -> dict[str, int]:
    """A subgroup's DPAS and 2D block load messages per k-step, from the blocking pass's own plan
    of its A [sm, BK] and B [BK, sn] tiles (``blocking.operand_plan``): a message the plan makes
    a gather (or a tile it cannot split) counts as one per register block. ``min_loads_per_kstep``:
    the same with each transposed load as tall as the target allows (the fewest messages)."""
    loads = fewest = 0
    for role, shape, dt, order in (("A", (sm, BK), a_t, (1, 0)), ("B", (BK, sn), b_t, b_order)):
        try:
            plan = operand_plan(t, role, shape, dt, k, ArrayType(dt, 2, order))
            tall = operand_plan(t, role, shape, dt, k, ArrayType(dt, 2, order),
                                blocks_per_load=t.block_io.max_height // t.dpas.n)
        except ValueError:
            return {}
        loads += len(plan.desc_origins())
        fewest += len(tall.desc_origins())
    dpas = -(-sm // t.dpas.max_m) * (sn // t.dpas.n) * (BK // k)
    return {"dpas_per_kstep": dpas, "loads_per_kstep": loads, "min_loads_per_kstep": fewest}


def gemm_resources(a: str = "a", b: str = "b", c: str = "c", BM: str = "BM", BN: str = "BN",
                   BK: str = "BK", acc: str = "ACC", precision: str = "PRECISION") -> Callable[..., list[str]]:
    """A ``resources`` model for GEMM-like kernels: the names of the A, B, C array arguments and
    of the tile-size and accumulator-type constexprs. See :func:`estimate_gemm`."""
    def model(config: Config, named: dict[str, Any], target: Any) -> list[str]:
        kw = {**named, **config.kwargs}
        est = estimate_gemm(target, kw[BM], kw[BN], kw[BK], config.num_subgroups, config.grf_mode,
                            named[a], named[b], named[c], kw.get(acc) or f32, kw.get(precision))
        return est["problems"]
    model.__name__ = "gemm_resources"
    return model


def check_config(config: Config, named: dict[str, Any], target: Any,
                 resources: Callable[..., list[str]] | None,
                 max_workgroup: int | None) -> str | None:
    """None when ``config`` fits ``target``, else the reasons (one line)."""
    t = get_target(target) if isinstance(target, str) else target
    problems: list[str] = []
    nsg = config.num_subgroups or 1
    if max_workgroup is not None and nsg * t.subgroup_size > max_workgroup:
        problems.append(f"{nsg} subgroups x {t.subgroup_size} lanes exceed the device's "
                        f"{max_workgroup} work-items per workgroup")
    if config.grf_mode == "256" and t.registers is not None and t.registers.large_grf_count is None:
        problems.append(f"grf_mode '256' is not available on {t.name}")
    if resources is not None:
        problems += [p for p in resources(config, named, t) if p not in problems]
    return "; ".join(problems) or None


# --- the autotuner ------------------------------------------------------------------------------

@dataclass
class TuningRecord:
    """What one tuning did: per-config median times (s), pruned configs and why, duration."""
    key: tuple
    best: Config
    timings: dict[Config, float] = field(default_factory=dict)
    pruned: list[tuple[Config, str]] = field(default_factory=list)
    failed: list[tuple[Config, str]] = field(default_factory=list)
    tuning_time_s: float = 0.0
    from_disk: bool = False


def _is_usm_array(x: Any) -> bool:
    return isinstance(x, UsmArray)


def _copy_of(x: Any) -> Any:
    if _is_usm_array(x):
        return x.copy()
    if hasattr(x, "clone") and hasattr(x, "copy_"):
        return x.clone()
    if type(x).__module__.startswith("dpctl"):
        import dpctl.tensor as dpt
        return dpt.copy(x)
    return np.array(x, copy=True)


def _restore(dst: Any, src: Any) -> None:
    if _is_usm_array(dst):
        dst.copy_from_host(src.to_numpy())
    elif hasattr(dst, "copy_"):
        dst.copy_(src)
    else:
        dst[...] = src


def _zero(x: Any) -> None:
    if _is_usm_array(x):
        x.copy_from_host(0)
    elif hasattr(x, "zero_"):
        x.zero_()
    else:
        x[...] = 0


@functools.lru_cache(maxsize=4096)
def _ndarray_key(dtype: np.dtype, shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple | None:
    """(dtype name, memory order) of a numpy array in the tuning key (what :func:`specialize_arg`
    gives it), or None for an array a kernel does not take."""
    try:
        dt = scalar_type_from_numpy(dtype)
        return dt.name, memory_order(shape, tuple(s // dtype.itemsize for s in strides))
    except (KeyError, XejitError):
        return None


class Autotuner:
    """A kernel wrapped by :func:`autotune`; launch it like the kernel: ``tuned[grid](*args)``.

    The grid may be a callable of the meta-parameters (the chosen config's constexprs and the
    launch's own keyword arguments). After a launch, ``best_config`` is the config used and
    ``records[key]`` tells how it was chosen.
    """

    def __init__(self, kernel: Any, configs: Sequence[Config], key: Sequence[str],
                 prune_configs_by: dict[str, Any] | None = None, warmup: float = 25.0,
                 rep: float = 100.0, min_reps: int = 3, restore_value: Sequence[str] | None = None,
                 reset_to_zero: Sequence[str] | None = None,
                 resources: Callable[..., list[str]] | None = None, cache_results: bool = True):
        if not getattr(kernel, "__xejit_kernel__", False):
            raise XejitError("@xejit.autotune must wrap an @xejit.kernel (put it above @xejit.kernel)")
        self.kernel = kernel
        self.fn = kernel.fn
        self.configs = list(configs) or [Config({})]
        for c in self.configs:
            if not isinstance(c, Config):
                raise XejitError(f"autotune configs must be xejit.Config objects, got {c!r}")
        self.arg_names = [p.name for p in kernel.params]
        self.key_names = list(key)
        for name in [*self.key_names, *(restore_value or ()), *(reset_to_zero or ())]:
            if name not in self.arg_names:
                raise XejitError(f"autotune of {self.fn.__name__}: {name!r} is not an argument "
                                 f"(arguments: {', '.join(self.arg_names)})")
        prune = dict(prune_configs_by or {})
        unknown = set(prune) - {"early_config_prune", "perf_model", "top_k"}
        if unknown:
            raise XejitError(f"prune_configs_by: unknown entries {sorted(unknown)}; expected "
                             f"early_config_prune, perf_model, top_k")
        self.early_config_prune = prune.get("early_config_prune")
        self.perf_model = prune.get("perf_model")
        self.top_k = prune.get("top_k", 1.0)
        self.warmup, self.rep, self.min_reps = warmup, rep, min_reps
        self.restore_value = list(restore_value or ())
        self.reset_to_zero = list(reset_to_zero or ())
        self.resources = resources
        self.cache_results = cache_results
        self._tuned_names = {k for c in self.configs for k in c.all_kwargs()}
        self.cache: dict[tuple, Config] = {}
        self.records: dict[tuple, TuningRecord] = {}
        self.best_config: Config | None = None
        functools.update_wrapper(self, kernel.fn)

    # --- launch -------------------------------------------------------------------------------

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return functools.partial(self.run, grid=grid)

    def __call__(self, *args, **kwargs):
        raise XejitError(f"launch {self.fn.__name__} with a grid: {self.fn.__name__}[grid](...)")

    def _named(self, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        named = dict(zip(self.arg_names, args))
        named.update({k: v for k, v in kwargs.items() if k in self.arg_names})
        return named

    def key_of(self, named: dict[str, Any]) -> tuple:
        """The tuning key: the key arguments' values (an array's shape), every array argument's
        dtype and memory order, and the constexprs given at launch (not tuned)."""
        parts: list[Any] = []
        for k in self.key_names:
            v = named.get(k)
            if hasattr(v, "shape") and not isinstance(v, (int, float)):
                parts.append(tuple(int(s) for s in v.shape))
            elif isinstance(v, (np.integer, np.floating)):
                parts.append(v.item())
            else:
                parts.append(v)
        tuned = {k for c in self.configs for k in c.kwargs}
        for name in self.arg_names:
            v = named.get(name)
            if name in self.kernel.constexprs:  # constexprs given at launch select another kernel
                if name not in tuned and name not in self.key_names and name in named:
                    parts.append((name, repr(v)))
                continue
            if v is None or isinstance(v, (bool, int, float, str, np.integer, np.floating)):
                continue
            if type(v) is np.ndarray:   # the common case, memoized (dtype and order only)
                got = _ndarray_key(v.dtype, v.shape, v.strides)
                if got is not None:
                    parts.append((name, *got))
                continue
            try:
                spec = specialize_arg(v)
            except XejitError:
                continue
            if isinstance(spec, ArraySpec):
                parts.append((name, spec.dtype, spec.order))
        return tuple(parts)

    def run(self, *args, grid: Any, **kwargs) -> None:
        if hasattr(self.kernel, "_device_args"):   # DLPack / SUAI / XPU arrays as UsmArray views (no copy)
            args, kwargs = self.kernel._device_args(args, kwargs)
        named = self._named(args, kwargs)
        clash = set(kwargs) & self._tuned_names
        if clash:
            raise XejitError(f"{self.fn.__name__}: {sorted(clash)} are tuned by @xejit.autotune "
                             f"and cannot also be passed to the launch")
        if len(self.configs) == 1:
            config = self.configs[0]
        else:
            key = self.key_of(named)
            config = self.cache.get(key)
            if config is None:
                config = self._tune(key, args, kwargs, named, grid)
        self.best_config = config
        if config.pre_hook is not None:
            config.pre_hook({**named, **config.all_kwargs()})
        self.kernel[grid](*args, **kwargs, **config.all_kwargs())

    # --- tuning -------------------------------------------------------------------------------

    def _interpreting(self) -> bool:
        return self.kernel.interpret if self.kernel.interpret is not None else options.current().interpret

    def _device_identity(self) -> tuple:
        if self._interpreting():
            return ("interpret",)
        try:
            d = default_device()
            return (d.name, d.target, d.backend, str(d.sycl_device.driver_version))
        except Exception as e:  # no device: the launch itself will say so
            return ("no-device", type(e).__name__)

    def _disk_key(self, key: tuple) -> str:
        # the kernel's source hash covers the helpers and kernels it calls, transitively
        return key_of("xejit-autotune-v1", __version__, self.kernel.source_hash, self._device_identity(),
                      options.current().emulate or "", tuple(c._identity() for c in self.configs),
                      key)

    def prune(self, named: dict[str, Any], kwargs: dict[str, Any] | None = None,
              target: Any = None) -> tuple[list[Config], list[tuple[Config, str]]]:
        """(configs to run, [(pruned config, reason)]) for these arguments on ``target``
        (default: :func:`current_target`)."""
        kwargs = kwargs or {}
        target = target if target is not None else current_target()
        max_wg = _max_workgroup_size()
        keep, pruned = [], []
        for c in self.configs:
            reason = check_config(c, {**named, **kwargs}, target, self.resources, max_wg)
            if reason:
                pruned.append((c, f"does not fit {target}: {reason}"))
            else:
                keep.append(c)
        if not keep:
            lines = "\n".join(f"  {c}: {r}" for c, r in pruned)
            raise XejitError(f"autotune of {self.fn.__name__}: no config fits target {target}:\n{lines}")
        keep, pruned = self._prune_by_compiler(keep, pruned, {**named, **kwargs}, target)
        if self.early_config_prune is not None:
            chosen = list(self.early_config_prune(keep, named, **kwargs))
            if not chosen:
                raise XejitError(f"autotune of {self.fn.__name__}: early_config_prune returned no config")
            pruned += [(c, "early_config_prune") for c in keep if c not in chosen]
            keep = chosen
        if self.perf_model is not None:
            top_k = self.top_k
            if isinstance(top_k, float) and top_k <= 1.0:
                top_k = max(1, int(len(keep) * top_k))
            if len(keep) > top_k:
                est = {c: self.perf_model(**{**named, **kwargs, **c.all_kwargs()}) for c in keep}
                ranked = sorted(keep, key=est.__getitem__)
                pruned += [(c, f"perf_model estimate {est[c]:.3g} not in top {top_k}") for c in ranked[top_k:]]
                keep = ranked[:top_k]
        return keep, pruned

    def compiler_verdict(self, config: Config, arguments: dict[str, Any], target: Any) -> tuple[str | None, int]:
        """What Intel's compiler says of ``config`` for ``target``: (None, 0) when it neither
        spills nor touches private memory in its hot loop, else (the reason, how bad: bytes)."""
        ck = self.kernel.compile(target=target, **arguments, **config.all_kwargs())
        b = ck.device_binary
        if b.spill_bytes:
            return (f"Intel's compiler ({b.toolchain}): spills {b.spill_bytes} B per thread in grf_mode "
                    f"{ck.grf_mode!r} ({b.summary()})"), b.spill_bytes
        if b.hot_loop is not None and b.hot_loop.private_sends:
            return (f"Intel's compiler: {b.hot_loop.private_sends} private-memory sends in the hot loop "
                    f"({b.summary()})"), b.private_bytes
        return None, 0

    def _prune_by_compiler(self, keep: list[Config], pruned: list[tuple[Config, str]], arguments: dict[str, Any],
                           target: Any) -> tuple[list[Config], list[tuple[Config, str]]]:
        """Drop the configs Intel's compiler says spill (or use private memory in the hot loop),
        where the target is an Intel GPU and the compiler is installed. When every config does,
        the least bad is kept and the pruned list says so: never silently."""
        t = get_target(target) if isinstance(target, str) else target
        if self._interpreting() or t.ocloc_device is None or find_toolchain() is None:
            return keep, pruned
        verdicts = {c: self.compiler_verdict(c, arguments, t) for c in keep}
        good = [c for c in keep if verdicts[c][0] is None]
        pruned = pruned + [(c, verdicts[c][0]) for c in keep if verdicts[c][0] is not None]
        if not good:
            least = min(keep, key=lambda c: verdicts[c][1])
            pruned = [(c, r) for c, r in pruned if c is not least]
            warnings.warn(f"autotune of {self.fn.__name__} on {t.name}: every config that fits is slowed by "
                          f"spills or private memory; keeping the least bad, {least}: {verdicts[least][0]}",
                          stacklevel=4)
            good = [least]
        return good, pruned

    def _tune(self, key: tuple, args, kwargs, named, grid) -> Config:
        verbose = options.current().print_autotuning
        disk_key = self._disk_key(key) if self.cache_results else None
        if disk_key is not None:
            record = self._load(disk_key, key)
            if record is not None:
                self.cache[key], self.records[key] = record.best, record
                if verbose:
                    print(f"xejit autotuning: {self.fn.__name__} key={key}: {record.best} "
                          f"(from the disk cache)", file=sys.stderr)
                return record.best
        t0 = time.perf_counter()
        configs, pruned = self.prune(named, kwargs)
        if verbose:
            for c, reason in pruned:
                print(f"xejit autotuning: {self.fn.__name__}: pruned {c}: {reason}", file=sys.stderr)
        if len(configs) == 1:  # nothing to compare: no trial runs
            record = TuningRecord(key, configs[0], {}, pruned, [], time.perf_counter() - t0)
            self.cache[key], self.records[key] = configs[0], record
            if verbose:
                print(f"xejit autotuning: {self.fn.__name__} key={key}: {configs[0]} (the only config "
                      f"left after pruning)", file=sys.stderr)
            return configs[0]
        saved = {n: _copy_of(named[n]) for n in self.restore_value if named.get(n) is not None}

        def setup() -> None:
            for n, v in saved.items():
                _restore(named[n], v)
            for n in self.reset_to_zero:
                if named.get(n) is not None:
                    _zero(named[n])

        sync = self._sync()
        timings: dict[Config, float] = {}
        failed: list[tuple[Config, str]] = []
        from tqdm.auto import tqdm
        bar = tqdm(configs, desc=f"autotuning {self.fn.__name__}", unit="config", delay=1.0,
                   leave=False, disable=None if len(configs) > 1 else True)
        try:
            for c in bar:
                launch = functools.partial(self.kernel[grid], *args, **kwargs, **c.all_kwargs())
                try:
                    if c.pre_hook is not None:
                        c.pre_hook({**named, **c.all_kwargs()})
                    times = do_bench(launch, warmup=self.warmup, rep=self.rep, min_reps=self.min_reps,
                                     setup=setup, sync=sync)
                    timings[c] = statistics.median(times)
                except XejitError as e:
                    failed.append((c, f"{type(e).__name__}: {e}"))
                    if verbose:
                        print(f"xejit autotuning: {self.fn.__name__}: {c} failed: {e}", file=sys.stderr)
        finally:
            bar.close()
            setup()
        if not timings:
            lines = "\n".join(f"  {c}: {r}" for c, r in failed + pruned)
            raise XejitError(f"autotune of {self.fn.__name__}: every config failed:\n{lines}")
        best = min(timings, key=timings.__getitem__)
        record = TuningRecord(key, best, timings, pruned, failed, time.perf_counter() - t0)
        self.cache[key], self.records[key] = best, record
        if disk_key is not None:
            self._store(disk_key, record)
        if verbose:
            table = ", ".join(f"{c.kwargs}/{c.num_subgroups}sg: {t * 1e3:.3f} ms" for c, t in timings.items())
            print(f"xejit autotuning: {self.fn.__name__} key={key}: chose {best} after "
                  f"{record.tuning_time_s:.2f} s [{table}]", file=sys.stderr)
        return best

    def _sync(self) -> Callable[[], None] | None:
        if self._interpreting():
            return None
        try:
            queue = default_device().queue
        except Exception:
            return None
        return queue.wait

    # --- persistence --------------------------------------------------------------------------

    def _store(self, disk_key: str, record: TuningRecord) -> None:
        payload = {
            "kernel": self.fn.__name__, "key": repr(record.key),
            "best": self.configs.index(record.best),
            "timings": [[self.configs.index(c), t] for c, t in record.timings.items()],
            "pruned": [[self.configs.index(c), r] for c, r in record.pruned],
            "failed": [[self.configs.index(c), r] for c, r in record.failed],
            "configs": [c.to_dict() for c in self.configs],
            "tuning_time_s": record.tuning_time_s,
        }
        default_cache().put(disk_key, json.dumps(payload).encode())

    def _load(self, disk_key: str, key: tuple) -> TuningRecord | None:
        blob = default_cache().get(disk_key)
        if blob is None:
            return None
        try:
            d = json.loads(blob)
            cfg = self.configs
            if d["configs"] != [c.to_dict() for c in cfg]:
                return None
            return TuningRecord(key, cfg[d["best"]], {cfg[i]: t for i, t in d["timings"]},
                                [(cfg[i], r) for i, r in d["pruned"]], [(cfg[i], r) for i, r in d["failed"]],
                                d["tuning_time_s"], from_disk=True)
        except (ValueError, KeyError, IndexError, TypeError):
            return None  # an entry from another layout: tune again and overwrite it


def autotune(configs: Sequence[Config], key: Sequence[str], prune_configs_by: dict[str, Any] | None = None,
             warmup: float = 25.0, rep: float = 100.0, restore_value: Sequence[str] | None = None,
             reset_to_zero: Sequence[str] | None = None, resources: Callable[..., list[str]] | None = None,
             min_reps: int = 3, cache_results: bool = True) -> Callable[[Any], Autotuner]:
    """Decorate an ``@xejit.kernel`` to choose among ``configs`` per value of ``key``.

    Args:
        configs: the candidates (:class:`Config`).
        key: argument names whose values (an array's shape) select a tuning; the dtype and
            layout of every array argument are always part of it.
        prune_configs_by: ``{"early_config_prune": f(configs, named_args, **kw) -> configs,
            "perf_model": f(**args) -> estimated time, "top_k": int or fraction}``.
        warmup, rep: milliseconds of warm-up and of timed runs per config (the median is used).
        restore_value: arguments the kernel overwrites that must be restored before each trial.
        reset_to_zero: arguments zeroed before each trial (e.g. atomic accumulators).
        resources: static fit model ``f(config, named_args, target) -> [reasons]``, e.g.
            :func:`gemm_resources`; workgroup size is always checked.
        cache_results: keep choices on disk (``XEJIT_CACHE_DIR``) across processes.
    """
    def deco(kernel: Any) -> Autotuner:
        return Autotuner(kernel, configs, key, prune_configs_by, warmup, rep, min_reps, restore_value,
                         reset_to_zero, resources, cache_results)
    return deco
