"""The XeGPU path for DPAS targets (pvc, bmg, lnl, dg2): xetile-sg -> XeGPU IR -> LLVM IR.

``lower(sg_fn, target, ctx)`` is the hook ``compiler.compile_kernel`` calls for targets with DPAS
(docs/compiler.md). It runs, as named units:

1. ``passes.blocking``          xetile-sg -> XeGPU (load/DPAS/store blocks, fallback report)
2. ``passes.lane_distribution`` sg_map (lane_layout / lane_data) of every block
3. target verification         ``xegpu.verify_for_target`` (DPAS shapes, 2D block limits)
4. :class:`XeGPULowering`       XeGPU -> LLVM IR (llvmlite)

(Software pipelining -- cooperative prefetch ``num_stages`` iterations ahead -- runs before
the distribution, on workgroup-level XeTile: ``passes.pipelining``.)

Register model: a block value [h, w] (VNNI-packed [h/v, w, v] as 32-bit words) is one LLVM
vector per lane laid out as ``lane_distribution`` says -- the per-work-item layout of the 2D
block loads and of the DPAS operands, so loads feed DPAS without shuffles. bf16 is held as i16
bits, f16 as half, int8 as i8; one element is a scalar (SPIR-V has no 1-component vectors);
blocks of more than 16 elements per lane (load blocks before they are sliced into DPAS blocks)
stay in a private buffer (:class:`Lazy`). Element-wise math on 16-bit floats is done in f32 and
rounded back (bf16: nearest-even), like the interpreter.

Instructions come from ``emulation.declare_*`` (real builtins, or their emulation when
``ctx["emulate"]``). Where the hardware has no boundary check the code has one:

* 2D block IO needs a surface at least 64 bytes wide, a pitch of at least 64 bytes and >= the
  width (a multiple of 16 is checked at compile time through the array's 16-byte alignment): the
  check is computed where a descriptor is created and each k-loop is *versioned* on it -- one
  version with only 2D block instructions and DPAS, one with the same accesses done per lane in
  code (an 8-bit DPAS operand block gathered at its DPAS: :class:`Deferred`). Outside loops
  each 2D op is guarded. The base address is aligned down to 64 bytes and the x coordinate /
  width moved by the same amount (as Triton does).
* Under emulation (the CPU device) the emulated instructions take any surface: they are called
  unconditionally and loops are not versioned (``ctx["version_loops"]=True`` turns it on); the
  base is aligned down as on the hardware, so misaligned array bases are exercised (tested with
  interior views of USM buffers).
* dg2 has no 2D block IO: loads use subgroup block reads of whole rows into registers
  (``block_reads.py``: 32-bit words for A/C, 16/8-bit rows packed into VNNI words for B), in a
  k-loop versioned on them being in bounds (else a bounds test per row); a k-loop made of DPAS on
  such loads computes C^T = B^T A^T from per-lane row loads (``transposed_dpas.py``), with B
  VNNI-packed once per workgroup in SLM where subgroups share it (``slm_staging.py``); stores are
  per lane with bounds checks (docs/compiler.md, "dg2").
* ``load_tile(..., padding=p)`` with p != 0 is done in code (the hardware pads with zero);
  reported as a fallback.

``tile_reduce`` along dim 1 of a block: in-register over the lane's elements, a shuffle-xor
butterfly across lanes, row r moved to lane r (the [h, 1] layout); along dim 0: in-lane over
the rows a lane holds, then a butterfly over the lane groups of narrow blocks. ``atomic_rmw``:
per-lane atomics on the lane's elements (``atomicrmw`` for 32/64-bit ints, a CAS loop on the bits
for f32; helpers shared with ``lower_generic`` in ``lowering_base``). ``gpu.slm_store`` / ``gpu.slm_load``: per-lane
stores and loads of the lane's elements (its ``sg_map`` coordinates) into a workgroup array, with
``gpu.barrier`` between them (wg_to_sg's exchange for convert_layout, tile_transpose and
reductions split over subgroups). Unsupported ops (fences and named barriers in user code, ...)
raise :class:`CompilerError` naming the op and its source line.
"""
from __future__ import annotations

import contextlib
import math
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Optional

import numpy as np
from llvmlite import ir

from ..ir import xegpu as xg
from ..ir.core import (ArrayType, Function, Operation, ScalarType, Value, VectorType, bf16, f16,
                       f32_to_bf16_bits, i1)
from ..ir.printer import print_function
from ..ir.verifier import verify_function
from . import bounds_debug
from . import block_coords as bc
from . import block_payload as bp
from . import builtins as bi
from . import emulation as emu
from .abi import kernel_abi
from .block_reads import BlockReads, Deferred, Words, words_count
from .decode_slm import DecodeSlm
from .parity_dpas import ParityDpas, any_nan, parity_join, parity_split, spreads_kept, ways
from .slm_staging import SlmStaging
from .transposed_dpas import TLoad, TransposedDpas, TSlice
from .lowering_base import (LoweringBase, array_span, counted_loop, float_to_int, floor_divide, in_span,
                            int_to_bool, join_phis, safe_int_division)
from .passes import blocking, lane_distribution
from .passes.common import CompilerError, written_arrays
from .passes.lane_distribution import per_lane_count
from .targets import Target, check_block_shape, get_target

F32, F16, I1, I8, I16, I32, I64 = bi.F32, bi.F16, ir.IntType(1), bi.I8, bi.I16, bi.I32, bi.I64
PRIV = ir.PointerType()

# The shared table (builtins) split the way this lowering emits them.
_FBIN = {k: v[0] for k, v in bi.BINARY.items() if v[0]}
_IMINMAX = {k: (">" if v[1].endswith("max") else "<", v[1][0] == "s")
            for k, v in bi.BINARY.items() if v[1] in ("smax", "smin", "umax", "umin")}
_IBIN = {k: v[1] for k, v in bi.BINARY.items()
         if v[1] and k not in _IMINMAX and v[1] != "floordiv"}
# Per-lane fallback accesses up to this many elements are unrolled (constant buffer indices).
_UNROLL_ELEMENTS = 128
#: no block IO: a DPAS operand load of at least this many 32-bit words a lane, outside the fast
#: version of a k-loop, is gathered at each DPAS (``Deferred``). Attention's V (16x64 fp16, 64
#: words with 8 lanes) needs it; GEMM's smaller cold-version loads measured better at the load
#: (fp16 32x64x32/16sg: 58.5 instead of 61.5 instructions per DPAS)
_DEFERRED_WORDS = 32
#: Column-major B (``lanerow``: 8 words a lane per array block) is read at each DPAS when the B
#: blocks of one A operand's DPAS hold at least this many words -- in the fast version; the cold
#: one takes ``_DEFERRED_WORDS`` (:meth:`XeGPULowering.load_lane_rows`). acm-g10, instructions per
#: DPAS: 8x64 fp16 decode tiles (64 words) spilled 1.9-4.4 KB with every block read at the load, 0
#: at their DPAS (8.88); 8x32 tiles did better at the load in the fast version (int8 BK=32 11.25
#: against 12.5, fp16 BK=32 9.88 against 10.88) and at the DPAS in the cold one (fp16 BK=32: 2.1 KB
#: of spill and 256 B of private memory gathered into a buffer, 0 now); 16x16 / 16x8 tiles (16 / 8
#: words) kept the buffer (read at the DPAS, their hot loops took 2 instructions more)
_DEFERRED_LANE_ROW_WORDS = 64
#: such a block read this many DPAS ahead (``Deferred.ahead``), in the cold and the fast version
LANE_ROWS_AHEAD = (1, 2)
#: casts moved to their store (``casts_at_their_stores``)
def _is_bf16(t) -> bool:
    return getattr(getattr(t, "dtype", t), "name", None) == "bf16"


_CASTS_AT_STORES = ("arith.truncf", "arith.extf", "arith.trunci", "arith.extsi", "arith.extui",
                    "arith.sitofp", "arith.uitofp", "arith.fptosi", "arith.fptoui")


def reg_type(t: ScalarType) -> ir.Type:
    """LLVM type of one element in registers and memory (bf16 as i16 bits)."""
    return {"f32": F32, "f16": F16, "bf16": I16, "i8": I8, "u8": I8, "i32": I32, "i64": I64,
            "index": I64, "i1": I1}[t.name]


def _const(t: ScalarType, v) -> ir.Constant:
    if t == bf16:
        return ir.Constant(I16, int(f32_to_bf16_bits(np.float32([v]))[0]))
    if t.is_float:
        return ir.Constant(reg_type(t), float(v))
    if t == i1:
        return ir.Constant(I1, int(bool(v)))
    bits = reg_type(t).width
    iv = int(v) & ((1 << bits) - 1)
    if iv >= 1 << (bits - 1):
        iv -= 1 << bits
    return ir.Constant(reg_type(t), iv)


def _splat(c: ir.Constant, n: int) -> ir.Constant:
    return c if n == 1 else ir.Constant(ir.VectorType(c.type, n), [c] * n)


def _vt(el: ir.Type, n: int) -> ir.Type:
    """``<n x el>``, or ``el`` itself for one element (SPIR-V has no 1-component vectors)."""
    return el if n == 1 else ir.VectorType(el, n)


# ----------------------------------------------------------------------------------------------
# Values during lowering
# ----------------------------------------------------------------------------------------------


@dataclass
class Arr:
    ptr: ir.Value
    dims: list          # logical shape (i64)
    strides: list       # logical strides in elements (i64)
    type: ArrayType


@dataclass
class TD:
    """A descriptor: its array, a 2D view (H, W, s0, s1: memory view for nd descriptors,
    logical for block-scattered ones), and the moving (row, col)."""
    arr: Arr
    H: ir.Value
    W: ir.Value
    s0: ir.Value
    s1: ir.Value
    row: ir.Value
    col: ir.Value
    type: xg.TensorDescType
    #: (aligned base, width bytes, height, pitch bytes (i32), base offset (i64), ok flag) of a 2D
    #: block surface: fixed per descriptor, computed where it is created (outside k-loops)
    surf: Optional[tuple] = None
    #: (x in elements, y) as i32 on that surface, moved with (row, col) by 32-bit adds: the block
    #: coordinates of 2D block instructions (None without a surface)
    xy: tuple | None = None
    #: targets without 2D block IO: True in the fast version of a k-loop versioned on this
    #: descriptor's block reads (every position in bounds), False in its cold version
    reads_in_bounds: Optional[bool] = None
    #: the ``wg_tile`` attribute (the workgroup tile this subgroup's descriptor is part of)
    wg: Optional[list] = None
    #: (elements, rows) i32 by which ``surf`` starts right of / below the array's own surface
    #: (``block_coords.own_surface``), subtracted from ``xy``; None: not moved
    shift: tuple | None = None
    #: in the fast version of a k-loop: (x0, y0, rows, cols) -- ``xy`` is (x0 + cols * counter,
    #: y0 + rows * counter) (``_lower_for``); None elsewhere
    counter: tuple | None = None
    #: with ``counter``: (cols per unit of the counter, n -> the counter in units of 2**n
    #: elements or None: ``_lower_for``'s ``units``)
    counted: tuple | None = None

    def moved(self, row, col, xy: tuple | None = None) -> "TD":
        return TD(self.arr, self.H, self.W, self.s0, self.s1, row, col, self.type, self.surf, xy,
                  wg=self.wg, shift=self.shift)


@dataclass
class GTD:
    """A scattered descriptor by element offsets: this lane's offsets (i64, like the data)."""
    arr: Arr
    offsets: ir.Value
    type: xg.TensorDescType


@dataclass
class Lazy:
    """A block too long for one SPIR-V vector, kept in a private buffer (only sliced)."""
    buf: ir.Value
    unit: ir.Type
    off: int
    type: VectorType


def load_mode(op: Operation) -> str:
    """How an ``xegpu.load_nd`` lays its block out: ``tpacked`` (transposed as 32-bit words:
    VNNI of a transposed block), ``transpose``, ``packed`` (VNNI) or ``plain``."""
    t = op.operands[0].type
    if op.attributes.get("transpose") is not None:
        return "tpacked" if op.attributes.get("transpose_bit_width") == 32 and t.dtype.bitwidth < 32 else "transpose"
    return "packed" if op.attributes.get("packed") else "plain"


def _i32(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """An i64 coordinate as i32 (a constant stays a constant)."""
    if isinstance(v, ir.Constant) and isinstance(v.constant, int):
        return I32(v.constant)
    return b.trunc(v, I32)


# ----------------------------------------------------------------------------------------------
# The lowering
# ----------------------------------------------------------------------------------------------


def _is_splat(x) -> bool:
    """A constant vector of one value (zeroinitializer included)."""
    return isinstance(x, ir.Constant) and (x.constant is None or isinstance(x.constant, list)
                                           and len({str(c) for c in x.constant}) == 1)


class XeGPULowering(DecodeSlm, SlmStaging, ParityDpas, TransposedDpas, BlockReads, LoweringBase):
    """XeGPU IR (after lane distribution) -> one SPIR-V kernel in an llvmlite module."""

    def __init__(self, fn: Function, target: Target, emulate: bool, num_subgroups: int = 1,
                 version_loops: Optional[bool] = None):
        self.fn, self.target, self.emulate = fn, target, emulate
        # k-loop versioning on the surface checks: always on real targets; off by default under
        # emulation (emulated instructions take any surface; both versions double build time)
        self.version_loops = (not emulate) if version_loops is None else version_loops
        self.sg = target.subgroup_size
        self.nsg = num_subgroups
        #: each block's ops in the order lowered (``block``; K-block order reorders a k-step's DPAS)
        self._order: dict = {}
        #: lowering the cold version of an 8-bit decode k-loop (``_versioned_on_block_reads``)
        self.cold_bytes = False
        #: a decode k-loop staged A from two descriptors: 16-bit stores from the block's corner
        self.corner_stores = False
        self.module = bi.new_module(fn.name)
        self.env: dict[int, Any] = {}
        self.instructions: Counter = Counter()
        #: id(surface-ok flag) -> True/False inside a versioned loop (see op_scf_for)
        self.versioned: dict[int, bool] = {}
        self.fallbacks: list[str] = []
        self._span: dict[int, tuple] = {}     # id(Arr) -> (lo, count) element offsets (array_span)
        self._arr_name: dict[int, str] = {}   # id(Arr) -> argument name
        #: XEJIT_DEBUG=1: checked gather/scatter sites, reported through a hidden last argument
        #: (codegen/bounds_debug.py); None when not in debug mode
        self.debug_sites: list | None = None
        self.span_checks = True               # False only for benchmarks/bench_gather_bounds.py
        self._payloads: dict[tuple, ir.Value] = {}   # (id(surface ok), BlockVariant, id(preheader)) -> payload
        self._preheaders: list[ir.Block] = []          # of the scf.for loops around self.b, outer first
        self._surf_depth: dict[int, int] = {}          # id(surface ok flag) -> loop depth it is made at
        #: id(2D block coordinate) -> the preheader of the loop it is invariant in (set once there)
        self._invariant: dict[int, ir.Block] = {}
        self._xy_memo: dict[tuple, ir.Value] = {}                   # block_xy's counted x per basic block
        self._payload_coords: dict[tuple, dict] = {}                # (payload, block) -> coordinates set
        self._merged_prefetches: set[int] = set()    # id(xegpu.prefetch_nd) lowered with a partner

    # -- setup -------------------------------------------------------------------------------

    def run(self) -> ir.Module:
        fn = self.fn
        self.signature, self.arg_plan = kernel_abi(fn)
        if self.debug_sites is not None:
            self.signature, self.arg_plan = self.signature + ["ptr"], self.arg_plan + [bounds_debug.PLAN_STEP]
        lltypes = [bi.GLOBAL if k in ("ptr", "ptr_in") else (F32 if k == "f32" else I64)
                   for k in self.signature]
        self.kernel = bi.kernel(self.module, fn.name, lltypes, subgroup_size=self.sg)
        entry = self.kernel.append_basic_block("entry")
        self.alloca_b = ir.IRBuilder(entry)
        body = self.kernel.append_basic_block("body")
        self.b = ir.IRBuilder(body)
        args = iter(self.kernel.args)
        for a in fn.args:
            t = a.type
            if isinstance(t, ArrayType):
                ptr = next(args)
                dims = [next(args) for _ in range(t.rank)]
                strides = [next(args) for _ in range(t.rank)]
                self.env[id(a)] = Arr(ptr, dims, strides, t)
                self._span[id(self.env[id(a)])] = array_span(self.b, dims, strides)
                self._arr_name[id(self.env[id(a)])] = a.name_hint or "?"
            else:
                self.env[id(a)] = next(args)
        self.lane = bi.sub_group_local_id(self.b)
        self.block(fn.entry)
        self.alloca_b.branch(body)
        return self.module

    def guarded(self, ok: ir.Value, instruction, in_code) -> None:
        """``if ok: instruction() else: in_code()``: the 2D block instruction when the surface
        suits it, else the same access in code. Emulated instructions handle any surface, so
        under emulation the instruction is called unconditionally (the CPU compiler mishandled
        out-of-line calls under such branches)."""
        if self.emulate:
            instruction()
            return
        mode = self.versioned.get(id(ok))
        if mode is not None:          # inside a k-loop version that already decided
            (instruction if mode else in_code)()
            return
        self.instructions["2D block op guarded by a surface check (width/pitch >= 64 B)"] += 1
        with self.b.if_else(ok) as (then, otherwise):
            with then:
                instruction()
            with otherwise:
                in_code()

    def block(self, blk) -> Optional[list]:
        ops = self.slm_op_order(blk.ops, *self.kb_order) if self.kb_order else blk.ops
        if self.target.block_io is None:
            ops = self.casts_at_their_stores(ops)
        self._order[id(blk)] = ops
        for op in ops:
            if op.name == "scf.yield":
                return [self.env[id(v)] for v in op.operands]
            if op.name == "func.return":
                self.b.ret_void()
                return None
            self.lower_op(op)
        return None

    @staticmethod
    def casts_at_their_stores(ops: list) -> list:
        """``ops`` with each cast to bf16 whose only use is a later store of the block moved to
        just before that store (without 2D block IO a store is per lane behind bounds tests: the
        casts of a tile's blocks, all made first, stayed live across all of them. A bf16 C's
        rounding of an 8x64 f32 accumulator, acm-g10: 8x512x32/8sg 480 B of spill -> 0). Only
        bf16 (a rounding of several instructions a value): an fp16 C with a bias + ReLU epilogue
        spilled 1.8-1.9 KB with its casts moved (8x512x32/8sg and 8x512x64/8sg), 0 / 96 B without."""
        at: dict = {}
        for o in ops:
            uses = [u for r in o.results for u, _ in r.uses] \
                if o.name in _CASTS_AT_STORES and o.results and _is_bf16(o.results[0].type) else []
            if len(uses) == 1 and uses[0].name == "xegpu.store_nd" and uses[0].parent is o.parent:
                at[id(uses[0])] = o
        if not at:
            return ops
        moved = {id(o) for o in at.values()}
        out = []
        for o in ops:
            if id(o) in at:
                out.append(at[id(o)])
            if id(o) not in moved:
                out.append(o)
        return out

    # -- small helpers -------------------------------------------------------------------------

    def alloca(self, ty: ir.Type) -> ir.Value:
        """A private buffer of ``ty`` (an array [n x unit] becomes a unit* of n elements)."""
        if isinstance(ty, (ir.ArrayType, ir.VectorType)):
            a = self.alloca_b.alloca(ir.ArrayType(ty.element, ty.count))
            # whole vectors are stored and loaded through it at their ABI alignment (up to 64 B)
            a.align = 64
            return self.alloca_b.gep(a, [I32(0), I32(0)])
        return self.alloca_b.alloca(ty)

    def coords(self, shape2d: tuple[int, int], e: int) -> tuple[ir.Value, ir.Value]:
        """(row, col) as i64 of this lane's element e of a block [h, w]."""
        h, w = shape2d
        b = self.b
        if w <= self.sg:
            rpg = self.sg // w
            row = b.add(I32(e * rpg), b.udiv(self.lane, I32(w))) if rpg > 1 else I32(e)
            col = b.urem(self.lane, I32(w)) if w < self.sg else self.lane
        else:
            ept = w // self.sg
            row = I32(e // ept)
            col = b.add(b.mul(self.lane, I32(ept)), I32(e % ept))
        return b.zext(row, I64), b.zext(col, I64)

    def unit_ty(self, t: VectorType) -> ir.IntType:
        """Integer type of one per-lane unit in memory buffers (32-bit words when packed)."""
        return I32 if len(t.shape) == 3 else ir.IntType(max(8, t.dtype.bitwidth))

    def vec_ty(self, t: VectorType) -> Optional[ir.VectorType]:
        """Per-lane register type of a block, or None when it has more than 16 elements per lane
        (SPIR-V vectors have at most 16 components): such a block stays in a private buffer
        (:class:`Lazy`) and is only sliced or fed to a DPAS."""
        n = per_lane_count(t.shape, self.sg)
        if n > 16:
            return None
        return _vt(I32 if len(t.shape) == 3 else reg_type(t.dtype), n)

    def value(self, v: Value) -> ir.Value:
        x = self.env[id(v)]
        if isinstance(x, (Lazy, Words)):
            raise CompilerError(f"internal: a block of {v.type} is too long for registers and is "
                                f"only sliceable", getattr(v, "op", None))
        return x

    def to_f32(self, v: ir.Value, t: ScalarType) -> ir.Value:
        b = self.b
        if t == bf16:
            n = v.type.count if isinstance(v.type, ir.VectorType) else None
            i32t = ir.VectorType(I32, n) if n else I32
            f32t = ir.VectorType(F32, n) if n else F32
            sh = _splat(I32(16), n) if n else I32(16)
            return b.bitcast(b.shl(b.zext(v, i32t), sh), f32t)
        if t == f16:
            n = v.type.count if isinstance(v.type, ir.VectorType) else None
            return b.fpext(v, ir.VectorType(F32, n) if n else F32)
        return v

    def from_f32(self, v: ir.Value, t: ScalarType) -> ir.Value:
        """Round f32 to ``t`` (bf16 nearest-even with NaN kept quiet; f16 fptrunc)."""
        b = self.b
        n = v.type.count if isinstance(v.type, ir.VectorType) else None

        def c(ty, x):
            return _splat(ty(x), n) if n else ty(x)
        vt = (lambda ty: ir.VectorType(ty, n)) if n else (lambda ty: ty)
        if t == bf16:
            u = b.bitcast(v, vt(I32))
            r = b.add(b.add(u, c(I32, 0x7FFF)), b.and_(b.lshr(u, c(I32, 16)), c(I32, 1)))
            r = b.lshr(r, c(I32, 16))
            nan = b.fcmp_unordered("uno", v, v)
            r = b.select(nan, c(I32, 0x7FC0), r)
            return b.trunc(r, vt(I16))
        if t == f16:
            return b.fptrunc(v, vt(F16))
        return v

    def ocl(self, name: str, args: list) -> ir.Value:
        fn = bi.declare(self.module, name, F32, [F32] * len(args))
        return bi.call(self.b, fn, args)

    def per_element(self, vals: list, f) -> ir.Value:
        """Apply scalar ``f`` to each element of equally long vectors (or scalars)."""
        b = self.b
        if not isinstance(vals[0].type, ir.VectorType):
            return f(*vals)
        n = vals[0].type.count
        out = None
        for e in range(n):
            r = f(*[b.extract_element(v, I32(e)) for v in vals])
            if out is None:
                out = ir.Constant(ir.VectorType(r.type, n), ir.Undefined)
            out = b.insert_element(out, r, I32(e))
        return out

    # -- scalars and environment ---------------------------------------------------------------

    def op_arith_constant(self, op: Operation) -> None:
        t = op.result.type
        if isinstance(t, VectorType):
            self.env[id(op.result)] = _splat(_const(t.dtype, op.attributes["value"]),
                                             per_lane_count(t.shape, self.sg))
        else:
            self.env[id(op.result)] = _const(t, op.attributes["value"])

    def op_vector_splat(self, op: Operation) -> None:
        t = op.result.type
        n = per_lane_count(t.shape, self.sg)
        v = self.env[id(op.operands[0])]
        self.env[id(op.result)] = self.splat(v, n)

    def splat(self, v: ir.Value, n: int) -> ir.Value:
        if n == 1:
            return v
        vec = self.b.insert_element(ir.Constant(ir.VectorType(v.type, n), ir.Undefined), v, I32(0))
        return self.b.shuffle_vector(vec, vec, ir.Constant(ir.VectorType(I32, n), [0] * n))

    def op_xejit_program_id(self, op: Operation) -> None:
        self.env[id(op.result)] = bi.group_id(self.b, op.attributes["axis"])

    def op_xejit_num_programs(self, op: Operation) -> None:
        self.env[id(op.result)] = bi.work_item(self.b, "num_groups", op.attributes["axis"])

    def op_xejit_dim(self, op: Operation) -> None:
        self.env[id(op.result)] = self.env[id(op.operands[0])].dims[op.attributes["dim"]]

    def op_xejit_stride(self, op: Operation) -> None:
        self.env[id(op.result)] = self.env[id(op.operands[0])].strides[op.attributes["dim"]]

    def op_gpu_subgroup_id(self, op: Operation) -> None:
        self.env[id(op.result)] = self.b.zext(bi.sub_group_id(self.b), I64)

    def op_gpu_num_subgroups(self, op: Operation) -> None:
        self.env[id(op.result)] = I64(self.nsg)

    def op_xejit_print(self, op: Operation) -> None:
        pass

    op_xejit_breakpoint = op_xejit_print

    # -- element-wise ---------------------------------------------------------------------------

    def elem_t(self, v: Value) -> ScalarType:
        t = v.type
        return t.dtype if isinstance(t, VectorType) else t

    def op_elementwise(self, op: Operation) -> None:
        b = self.b
        n = op.name
        t = self.elem_t(op.operands[0])
        xs = [self.value(v) for v in op.operands]
        if t.is_float:
            xs = [self.to_f32(x, t) for x in xs]
            if n in _FBIN:
                r = getattr(b, _FBIN[n])(*xs)
            elif n == "arith.negf":
                r = b.fneg(xs[0])
            else:
                r = self.per_element(xs, lambda *a: self.ocl(bi.MATH[n][0], list(a)))
            r = self.from_f32(r, t)
        else:
            if n in ("arith.divsi", "arith.divui", "arith.remsi", "arith.remui"):
                r = safe_int_division(b, getattr(b, _IBIN[n]), *xs, n.endswith("si"))
            elif n in _IBIN:
                r = getattr(b, _IBIN[n])(*xs)
            elif n in _IMINMAX:
                cmp, signed = _IMINMAX[n]
                c = (b.icmp_signed if signed else b.icmp_unsigned)(cmp, *xs)
                r = b.select(c, xs[0], xs[1])
            elif n == "math.absi":
                neg = b.neg(xs[0])
                r = b.select(b.icmp_signed("<", xs[0], ir.Constant(xs[0].type, None)), neg, xs[0])
            else:
                raise self.err(op, "not supported for integers")
        self.env[id(op.result)] = r

    def op_arith_cmpf(self, op: Operation) -> None:
        t = self.elem_t(op.operands[0])
        a, c = (self.to_f32(self.env[id(v)], t) for v in op.operands)
        pred = op.attributes["predicate"]
        r = self.b.fcmp_unordered("!=", a, c) if pred == "ne" else self.b.fcmp_ordered(bi.COMPARE[pred], a, c)
        self.env[id(op.result)] = r

    def op_arith_cmpi(self, op: Operation) -> None:
        t = self.elem_t(op.operands[0])
        a, c = (self.env[id(v)] for v in op.operands)
        f = self.b.icmp_signed if t.is_signed else self.b.icmp_unsigned
        self.env[id(op.result)] = f(bi.COMPARE[op.attributes["predicate"]], a, c)

    def op_arith_select(self, op: Operation) -> None:
        c, a, d = (self.env[id(v)] for v in op.operands)
        self.env[id(op.result)] = self.b.select(c, a, d)

    def _cast(self, op: Operation) -> None:
        b = self.b
        src, dst = self.elem_t(op.operands[0]), self.elem_t(op.result)
        x = self.env[id(op.operands[0])]
        n = x.type.count if isinstance(x.type, ir.VectorType) else None
        ty = (lambda t: ir.VectorType(t, n)) if n else (lambda t: t)
        dl = reg_type(dst)
        if src == dst:
            r = x
        elif src.is_float and dst.is_float:
            r = self.from_f32(self.to_f32(x, src), dst)
        elif src.is_float:
            r = float_to_int(b, self.to_f32(x, src), dl, dst.is_signed)
        elif dst.is_float:
            signed = src.is_signed and src != i1
            if src == i1 and n:   # `uitofp <n x i1>` crashes LLVM's SPIR-V backend (found by tests/hostile)
                r = b.select(x, ir.Constant(ty(F32), [1.0] * n), ir.Constant(ty(F32), [0.0] * n))
            else:
                r = b.sitofp(x, ty(F32)) if signed else b.uitofp(x, ty(F32))
            r = self.from_f32(r, dst)
        else:
            sw, dw = reg_type(src).width, dl.width
            if dw == 1 and sw > 1:
                r = int_to_bool(b, x)
            elif sw == dw:
                r = x
            elif sw > dw:
                r = b.trunc(x, ty(dl))
            else:
                r = b.sext(x, ty(dl)) if src.is_signed and src != i1 else b.zext(x, ty(dl))
        self.env[id(op.result)] = r

    def op_arith_floordivsi(self, op: Operation) -> None:
        b = self.b
        a, c = (self.env[id(v)] for v in op.operands)
        self.env[id(op.result)] = safe_int_division(b, lambda x, y: floor_divide(b, x, y), a, c, True)

    # -- blocks ---------------------------------------------------------------------------------

    def shuffle_range(self, v: ir.Value, start: int, count: int) -> ir.Value:
        if not isinstance(v.type, ir.VectorType):
            assert start == 0 and count == 1
            return v
        if count == 1:
            return self.b.extract_element(v, I32(start))
        mask = ir.Constant(ir.VectorType(I32, count), [start + i for i in range(count)])
        return self.b.shuffle_vector(v, v, mask)

    def _shuffle_any(self, v: ir.Value, lane: ir.Value) -> ir.Value:
        """intel_sub_group_shuffle of a value of any register type (via 32 bits)."""
        b = self.b
        t = v.type
        if isinstance(t, ir.FloatType):
            return bi.shuffle(b, v, lane, "f32")
        if isinstance(t, ir.HalfType):
            return b.bitcast(b.trunc(bi.shuffle(b, b.zext(b.bitcast(v, I16), I32), lane, "i32"), I16), F16)
        if t.width == 64:
            lo = bi.shuffle(b, b.trunc(v, I32), lane, "i32")
            hi = bi.shuffle(b, b.trunc(b.lshr(v, I64(32)), I32), lane, "i32")
            return b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), I64(32)))
        if t.width == 32:
            return bi.shuffle(b, v, lane, "i32")
        return b.trunc(bi.shuffle(b, b.zext(v, I32), lane, "i32"), t)

    def op_vector_extract_strided_slice(self, op: Operation) -> None:
        src_t: VectorType = op.operands[0].type
        o, s = op.attributes["offsets"][0], op.attributes["sizes"][0]
        if len(op.attributes["offsets"]) != 1:
            raise self.err(op, "only slices of whole rows are supported")
        w = src_t.shape[1]
        if w <= self.sg:
            rpg = self.sg // w
            if o % rpg or s % rpg:
                raise self.err(op, f"row slice [{o}, {o + s}) splits a lane row group of {rpg}")
            start, cnt = o // rpg, s // rpg
        else:
            ept = w // self.sg
            start, cnt = o * ept, s * ept
        src = self.env[id(op.operands[0])]
        if isinstance(src, TLoad):
            self.env[id(op.result)] = TSlice(src, o // 8)
        elif isinstance(src, Words):
            self.env[id(op.result)] = self.words_slice(src, start, cnt, op.result.type)
        elif isinstance(src, Lazy):
            self.env[id(op.result)] = self.from_buffer(src.buf, src.unit, src.off + start, op.result.type)
        else:
            self.env[id(op.result)] = self.shuffle_range(src, start, cnt)

    def op_vector_step(self, op: Operation) -> None:
        t = op.result.type
        n = per_lane_count(t.shape, self.sg)
        vals = []
        for e in range(n):
            r, c = self.coords(tuple(t.shape), e)
            vals.append(c if t.shape[0] == 1 else r)
        if n == 1:
            self.env[id(op.result)] = vals[0]
            return
        out = ir.Constant(ir.VectorType(I64, n), ir.Undefined)
        for e, v in enumerate(vals):
            out = self.b.insert_element(out, v, I32(e))
        self.env[id(op.result)] = out

    def op_xetile_tile_broadcast(self, op: Operation) -> None:
        dst_t = op.result.type
        x = self.env[id(op.operands[0])]
        h, w = dst_t.shape
        n_dst = per_lane_count(dst_t.shape, self.sg)
        b = self.b
        if list(op.attributes.get("dims", [])) == [1]:
            # a column [h, 1]: lane r holds row r (rows beyond the subgroup in further elements)
            src_n = per_lane_count(op.operands[0].type.shape, self.sg)
            src = self._elems(x)
            out = ir.Constant(ir.VectorType(src[0].type, n_dst), ir.Undefined) if n_dst > 1 else None
            for e in range(n_dst):
                r, _ = self.coords((h, w), e)
                r32 = b.trunc(r, I32)
                comp = b.udiv(r32, I32(self.sg)) if src_n > 1 else None
                lane = b.urem(r32, I32(self.sg))
                el = src[0]
                for k in range(1, src_n):   # pick the component holding row r
                    el = b.select(b.icmp_unsigned("==", comp, I32(k)), src[k], el)
                v = self._shuffle_any(el, lane)
                out = v if out is None else b.insert_element(out, v, I32(e))
            self.env[id(op.result)] = out
            return
        if w < self.sg:   # lanes >= w hold no element of the single row: read it from lane % w
            e0 = b.extract_element(x, I32(0)) if isinstance(x.type, ir.VectorType) else x
            kind = {32: "i32", 16: "i16"}.get(getattr(e0.type, "width", 32), None)
            val = e0
            if isinstance(e0.type, ir.FloatType):
                val = bi.shuffle(b, e0, b.urem(self.lane, I32(w)), "f32")
            elif kind == "i32":
                val = bi.shuffle(b, e0, b.urem(self.lane, I32(w)), "i32")
            else:
                wide = b.zext(e0, I32)
                val = b.trunc(bi.shuffle(b, wide, b.urem(self.lane, I32(w)), "i32"), e0.type)
            self.env[id(op.result)] = self.splat(val, n_dst)
            return
        per_row = w // self.sg
        if not isinstance(x.type, ir.VectorType):
            self.env[id(op.result)] = self.splat(x, n_dst)
            return
        mask = [i % per_row for i in range(n_dst)]
        self.env[id(op.result)] = b.shuffle_vector(x, x, ir.Constant(ir.VectorType(I32, n_dst), mask))

    # -- descriptors ------------------------------------------------------------------------------

    def op_xegpu_create_nd_tdesc(self, op: Operation) -> None:
        arr: Arr = self.env[id(op.operands[0])]
        r, c = (self.env[id(v)] for v in op.operands[1:])
        t = arr.type
        if t.rank == 1:
            H, W, s0 = I64(1), arr.dims[0], arr.dims[0]
        elif tuple(t.order) == (0, 1):
            H, W, s0 = arr.dims[1], arr.dims[0], arr.strides[1]
        else:
            H, W, s0 = arr.dims[0], arr.dims[1], arr.strides[0]
        td = TD(arr, H, W, s0, I64(1), r, c, op.result.type)
        if self.target.block_io is None:
            td.wg = op.attributes.get("wg_tile")
        else:
            td.surf = self.make_surface(td)
            eb = t.dtype.bitwidth // 8
            if eb >= 1:     # the hardware's coordinate arithmetic, also under emulation
                td.xy = self.xy_of(td, r, c)
        self.env[id(op.result)] = td

    def op_xegpu_create_tdesc(self, op: Operation) -> None:
        arr: Arr = self.env[id(op.operands[0])]
        if len(op.operands) == 2:     # element offsets (this lane's fragment of them)
            self.env[id(op.result)] = GTD(arr, self.env[id(op.operands[1])], op.result.type)
            return
        r, c = (self.env[id(v)] for v in op.operands[1:])
        if arr.type.rank == 1:
            H, W, s0, s1 = I64(1), arr.dims[0], arr.dims[0], I64(1)
        else:
            H, W = arr.dims
            s0, s1 = arr.strides
        self.env[id(op.result)] = TD(arr, H, W, s0, s1, r, c, op.result.type)

    def xy_of(self, td: TD, r: ir.Value, c: ir.Value, split: bool = True) -> tuple[ir.Value, ir.Value]:
        """The i32 (x in elements, y) of (row ``r``, col ``c``) on ``td``'s surface; a coordinate
        that does not fit is put far out of bounds (``block_coords.clamp``), not truncated."""
        b = self.b
        if split and self.target.block_io.immediate_offsets and td.shift is None:
            # (r, c) a neighbour's plus small constants (the blocking pass's descriptors of one
            # tile): that neighbour's (x, y) plus the constants, so a k-loop's blocks of one
            # surface differ by constants -- immediate offsets of one payload (op_xegpu_load_nd)
            (rb, dr), (cb, dc) = bc.split_small_add(r), bc.split_small_add(c)
            key = ("xy", id(td.arr), id(td.H), id(rb), id(cb), id(b.block))   # one value per array view
            if key not in self._xy_memo:
                self._xy_memo[key] = self.xy_of(td.moved(td.row, td.col, None), rb, cb, False)
            x, y = self._xy_memo[key]
            return (b.add(x, I32(dc)) if dc else x), (b.add(y, I32(dr)) if dr else y)
        eb = td.type.dtype.bitwidth // 8
        x0 = b.lshr(td.surf[4], I32(eb.bit_length() - 1))   # the surface's base offset
        x, y = b.add(bc.clamp(b, c), x0), bc.clamp(b, r)
        if td.shift is not None:     # a far coordinate stays far: the shift is < 2**24
            x, y = b.sub(x, td.shift[0]), b.sub(y, td.shift[1])
        return x, y

    def op_xegpu_update_nd_offset(self, op: Operation) -> None:
        td: TD = self.env[id(op.operands[0])]
        dr, dc = (self.env[id(v)] for v in op.operands[1:])
        b = self.b
        row, col = b.add(td.row, dr), b.add(td.col, dc)
        xy = None
        if td.xy is not None:
            small = all(isinstance(v, ir.Constant) and abs(v.constant) <= bc.SMALL_STEP for v in (dr, dc))
            # small constant moves: 32-bit adds (a far coordinate stays far); others: clamp again
            xy = (b.add(td.xy[0], _i32(b, dc)), b.add(td.xy[1], _i32(b, dr))) if small else \
                self.xy_of(td, row, col)
        self.env[id(op.result)] = td.moved(row, col, xy)

    # -- per-lane accesses in code (dg2, fallbacks, narrow surfaces) --------------------------------

    def elem_ptr(self, td: TD, r: ir.Value, c: ir.Value, ety: ir.Type) -> tuple[ir.Value, ir.Value]:
        """(pointer, in-bounds flag) of element (r, c) of the descriptor's view (i64 coords)."""
        b = self.b
        ok = b.and_(b.and_(b.icmp_signed(">=", r, I64(0)), b.icmp_signed("<", r, td.H)),
                    b.and_(b.icmp_signed(">=", c, I64(0)), b.icmp_signed("<", c, td.W)))
        off = b.add(b.mul(r, td.s0), b.mul(c, td.s1))
        off = b.select(ok, off, I64(0))
        return b.gep(td.arr.ptr, [off], source_etype=ety), ok

    def load_elem(self, td: TD, r, c, ety, pad) -> ir.Value:
        if ety == I1:    # bool arrays hold one byte per element: != 0 is the value
            ptr, ok = self.elem_ptr(td, r, c, I8)
            v = self.b.icmp_unsigned("!=", self.b.load(ptr, typ=I8), I8(0))
        else:
            ptr, ok = self.elem_ptr(td, r, c, ety)
            v = self.b.load(ptr, typ=ety)
        return self.b.select(ok, v, pad)

    def coords_dyn(self, shape2d: tuple[int, int], e: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(row, col) as i64 of this lane's element ``e`` (an i64 loop index) of a block [h, w]."""
        h, w = shape2d
        b = self.b
        lane = b.zext(self.lane, I64)
        if w <= self.sg:
            rpg = self.sg // w
            row = b.add(b.mul(e, I64(rpg)), b.udiv(lane, I64(w))) if rpg > 1 else e
            col = b.urem(lane, I64(w)) if w < self.sg else lane
        else:
            ept = w // self.sg
            row = b.udiv(e, I64(ept))
            col = b.add(b.mul(lane, I64(ept)), b.urem(e, I64(ept)))
        return row, col

    @contextlib.contextmanager
    def for_range(self, n: int):
        """``for e in range(n)`` as an LLVM loop (keeps per-element fallback code small)."""
        b = self.b
        pre = b.block
        fn = b.function
        head = fn.append_basic_block("elem.head")
        body = fn.append_basic_block("elem.body")
        done = fn.append_basic_block("elem.done")
        b.branch(head)
        b.position_at_end(head)
        e = b.phi(I64)
        e.add_incoming(I64(0), pre)
        b.cbranch(b.icmp_signed("<", e, I64(n)), body, done)
        b.position_at_end(body)
        yield e
        e.add_incoming(b.add(e, I64(1)), b.block)
        b.branch(head)
        b.position_at_end(done)

    def each_element(self, n: int, stores: bool = False):
        """This lane's ``n`` elements, as i64 indices: unrolled with constant indices up to
        ``_UNROLL_ELEMENTS`` (the buffers they fill then stay in registers -- a loop index into
        a private array puts it in private memory, 512-4096 B a thread in GEMMs), an LLVM loop
        beyond (keeps code small for huge blocks)."""
        # dg2's gathers into buffers keep the loop: unrolled, LLVM turns its i8 buffers into
        # <32 x i8> phis that the SPIR-V backend cannot legalize (its block loads gather into
        # registers instead: codegen/block_reads.py). Its stores unroll: the loop's run-time
        # index into the stored vector was private memory, and the CPU device stored wrong
        # values with it in workgroups of 8 and more subgroups (tests/codegen/xegpu/test_dg2_block_reads.py).
        # Emulated loads loop too: private memory costs the CPU device nothing worth the unrolled
        # code's build time (bmg int8 32x32x128 column-major, both k-loop versions: 5.2 -> 2.2 s).
        if n <= _UNROLL_ELEMENTS and (stores or (self.target.block_io is not None and not self.emulate)):
            for i in range(n):
                yield I64(i)
        else:
            with self.for_range(n) as e:
                yield e

    def gather_block(self, td: TD, out_t: VectorType, r0, c0, mode: str, pad, buf, off: int) -> None:
        """Read this lane's fragment of a block element-wise into ``buf`` (see _gather_body)."""
        self._gather_body(td, out_t, r0, c0, mode, pad, buf, off)

    def _gather_body(self, td: TD, out_t: VectorType, r0, c0, mode: str, pad, buf, off: int) -> None:
        """Read this lane's fragment of a block element-wise into ``buf`` (units from ``off``).
        ``mode``: plain (out [h, w]), packed (out [h/v, w, v] from rows), tpacked (out
        [w/v, h, v] from a memory block [h, w] transposed as 32-bit words), transpose (out [w, h])."""
        b = self.b
        ety = reg_type(out_t.dtype)
        unit = self.unit_ty(out_t)
        for e in self.each_element(per_lane_count(out_t.shape, self.sg)):
            r, c = self.coords_dyn(tuple(out_t.shape[:2]), e)
            if mode == "plain":
                val = self.load_elem(td, b.add(r0, r), b.add(c0, c), ety, pad)
            elif mode == "transpose":
                val = self.load_elem(td, b.add(r0, c), b.add(c0, r), ety, pad)
            else:
                v = out_t.shape[2]
                bits = out_t.dtype.bitwidth
                val = I32(0)
                for t in range(v):
                    if mode == "packed":
                        rr, cc = b.add(r0, b.add(b.mul(r, I64(v)), I64(t))), b.add(c0, c)
                    else:   # tpacked: word (r, c) = memory row c, columns r*v + t
                        rr, cc = b.add(r0, c), b.add(c0, b.add(b.mul(r, I64(v)), I64(t)))
                    x = b.zext(b.bitcast(self.load_elem(td, rr, cc, ety, pad), ir.IntType(bits)), I32)
                    val = b.or_(val, b.shl(x, I32(t * bits))) if t else x
            val = b.zext(val, unit) if val.type == I1 else b.bitcast(val, unit)
            b.store(val, b.gep(buf, [b.add(e, I64(off))], source_etype=unit))

    def from_buffer(self, buf, unit: ir.Type, off: int, t: VectorType):
        """A block value read back from a private buffer (or a Lazy handle when too long)."""
        vt = self.vec_ty(t)
        ptr = self.b.gep(buf, [I32(off)])
        if vt is None:
            return Lazy(buf, unit, off, t)
        if getattr(vt, "element", vt) == I1:   # bytes in the buffer
            rt = _vt(unit, vt.count) if isinstance(vt, ir.VectorType) else unit
            raw = self.b.load(self.b.bitcast(ptr, rt.as_pointer()), typ=rt)
            return self.b.icmp_unsigned("!=", raw, ir.Constant(raw.type, None))
        return self.load_private(ptr, vt)

    def load_private(self, ptr: ir.Value, ty: ir.Type) -> ir.Value:
        """A value of type ``ty`` read from a private buffer; under emulation as 64-bit words
        (bitcast back): the CPU device's -O0 build reads a lane's private vector element by
        element for every lane (a gather, ~10 instructions an element), so 4x fewer elements
        (the emulated pvc f16 GEMM with both k-loop versions of test_block_coords: driver build
        3.1 -> 0.45 s). The same bytes at the same alignment; GPU targets read ``ty``."""
        el = ty.element if isinstance(ty, ir.VectorType) else None
        bits = {ir.HalfType: 16, ir.FloatType: 32}.get(type(el), getattr(el, "width", 0)) * getattr(ty, "count", 0)
        if not self.emulate or bits % 64 or bits <= 64:
            return self.b.load(ptr, typ=ty)
        wt = ir.VectorType(I64, bits // 64)
        return self.b.bitcast(self.b.load(self.b.bitcast(ptr, wt.as_pointer()), typ=wt), ty)

    def scatter_block(self, td: TD, val_t: VectorType, x: ir.Value, r0, c0) -> None:
        """Write this lane's fragment of a block element-wise (out-of-bounds elements dropped)."""
        self._scatter_body(td, val_t, x, r0, c0)

    def _scatter_body(self, td: TD, val_t: VectorType, x: ir.Value, r0, c0) -> None:
        b = self.b
        ety = reg_type(val_t.dtype)
        h, w = val_t.shape
        # after a decode k-loop with A staged from two descriptors, 16-bit integer words (a bf16
        # C) are stored with bounds and offset from the block's corner (-r0 <= r < H - r0, likewise
        # the columns): 0 <= r0 + r < H, the same as an A tile's cold reads of those rows, were
        # values LLVM kept from before the k-loops (bf16 8x512x64/8sg, acm-g10: 320 B of spill
        # across them -> 0). Not elsewhere: fp16 the same 0, int8 8x512x128/8sg 0 -> 480 B, the
        # fp16 4096^3 pick 531 -> 537 instructions in its hot loop
        corner = (b.neg(r0), b.sub(td.H, r0), b.neg(c0), b.sub(td.W, c0)) \
            if self.corner_stores and ety == I16 else None
        for e in self.each_element(per_lane_count(val_t.shape, self.sg), stores=True):
            r, c = self.coords_dyn((h, w), e)
            if corner is None:
                ptr, ok = self.elem_ptr(td, b.add(r0, r), b.add(c0, c), ety)
            else:
                nr, hr, nc, wc = corner
                ok = b.and_(b.and_(b.icmp_signed(">=", r, nr), b.icmp_signed("<", r, hr)),
                            b.and_(b.icmp_signed(">=", c, nc), b.icmp_signed("<", c, wc)))
                off = b.sub(b.add(b.mul(r, td.s0), b.mul(c, td.s1)), b.add(b.mul(nr, td.s0), b.mul(nc, td.s1)))
                ptr = b.gep(td.arr.ptr, [b.select(ok, off, I64(0))], source_etype=ety)
            if w <= self.sg and h % (self.sg // w):   # lanes past the last row hold nothing
                ok = b.and_(ok, b.icmp_unsigned("<", r, I64(h)))
            with b.if_then(ok):
                el = b.extract_element(x, b.trunc(e, I32)) if isinstance(x.type, ir.VectorType) else x
                if el.type == I1:    # one byte per bool
                    el, ptr = b.zext(el, I8), b.bitcast(ptr, I8.as_pointer(ptr.type.addrspace))
                b.store(el, ptr)

    # -- 2D block IO ---------------------------------------------------------------------------------

    def make_surface(self, td: TD) -> tuple:
        """The loop-invariant part of a 2D block surface and whether 2D block IO may use it."""
        b = self.b
        eb = td.type.dtype.bitwidth // 8
        # 2D block IO needs a 64-byte aligned base: align it down and move x / widen the surface
        # by the same amount (as Triton does). Emulated instructions follow the same path.
        # The byte offset in 32 bits straight from the pointer: LLVM narrows a 64-bit one when
        # only its low bits are used, and the SPIR-V backend then types the mix wrongly
        # (spirv-val: "operands to have the same bit width").
        off32 = b.and_(b.ptrtoint(td.arr.ptr, I32), I32(63))
        off = b.zext(off32, I64)
        base = b.gep(td.arr.ptr, [b.neg(off)], source_etype=I8)
        width = b.add(b.mul(td.W, I64(eb)), off)
        pitch = b.mul(td.s0, I64(eb))
        lim = self.target.block_io
        width32, height32, pitch32 = b.trunc(width, I32), b.trunc(td.H, I32), b.trunc(pitch, I32)
        ok = b.and_(b.icmp_signed(">=", width, I64(lim.min_width_bytes)),
                    b.icmp_signed(">=", pitch, I64(lim.min_pitch_bytes)))
        for v in (pitch, width, td.H):
            ok = b.and_(ok, b.icmp_signed("<", v, I64(lim.max_surface)))
        if eb > 1:    # x in whole elements (TD.xy): a base aligned to its element size
            ok = b.and_(ok, b.icmp_unsigned("==", b.and_(off32, I32(eb - 1)), I32(0)))
        ok = b.and_(ok, b.icmp_signed(">=", pitch, width))
        self._surf_depth[id(ok)] = len(self._preheaders)
        return base, width32, height32, pitch32, off32, ok

    def block_xy(self, td: TD, unit_bytes: int, eb: int, off: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(x in units of ``unit_bytes``, y) as i32 of the descriptor's block on its surface."""
        b = self.b
        if td.xy is not None:     # moved by 32-bit adds; the surface check has an aligned base
            x, y = td.xy
            if unit_bytes > eb and td.counted is not None:
                mc, units = td.counted
                n = (unit_bytes // eb).bit_length() - 1
                q = units(n)
                if q is not None:   # x0's units (made before the loop) + the loop's count of units
                    x0, d = td.counter[0], 0
                    if self.target.block_io.immediate_offsets:   # a constant apart: kept outermost
                        x0, d = bc.split_small_add(x0)
                        if d % (1 << n):
                            x0, d = td.counter[0], 0
                    key = (id(x0), n, mc, id(b.block))    # one value for the blocks a constant apart
                    x = self._xy_memo.get(key)
                    if x is None:
                        x = self._xy_memo[key] = b.add(b.ashr(x0, I32(n)), q if mc == 1 else b.mul(q, I32(mc)))
                    return (b.add(x, I32(d >> n)) if d else x), y
            if unit_bytes > eb:
                x = b.ashr(x, I32((unit_bytes // eb).bit_length() - 1))
            elif unit_bytes < eb:
                x = b.shl(x, I32((eb // unit_bytes).bit_length() - 1))
            return x, y
        # x in units of the block's elements: a shift (unit_bytes is a power of two), not a
        # signed divide; coordinates that do not fit in i32 are put far out of bounds
        x = b.add(b.mul(b.sext(bc.clamp(b, td.col), I64), I64(eb)), b.zext(off, I64))
        if unit_bytes > 1:
            x = b.ashr(x, I64(unit_bytes.bit_length() - 1))
        return b.trunc(x, I32), bc.clamp(b, td.row)

    def surface(self, td: TD, unit_bytes: int, eb: int):
        """(aligned base, width bytes, height, pitch bytes, (x in units, y), surface-ok flag)."""
        b = self.b
        base, width, height, pitch, off, ok = td.surf if td.surf is not None else self.make_surface(td)
        x, y = self.block_xy(td, unit_bytes, eb, off)
        coord = b.insert_element(ir.Constant(emu.V2I32, ir.Undefined), x, I32(0))
        coord = b.insert_element(coord, y, I32(1))
        return base, width, height, pitch, coord, ok

    def payload(self, td: TD, var: emu.BlockVariant, x: ir.Value, y: ir.Value) -> tuple | None:
        """(the IGC address payload of ``td``'s surface for blocks of ``var`` in the current
        loop, the [(axis, value)] each access sets), or None where the SPIR-V builtin is used:
        under emulation, on targets without the builtins, for shapes they lack
        (``block_payload.problem``), and outside the loops the surface is made around (IGC
        builds the payload once there either way).

        The payload is made in the preheader of the outermost loop entered since the surface
        (made at the surface, payloads stayed live across the whole prologue and the cold
        per-lane loop version, which then spilled on bmg). A coordinate invariant in that loop
        (``self._invariant``) is set there once and is part of the payload's key; each access
        sets the others, so descriptors moved from one another share it in any order."""
        if self.emulate or td.surf is None or bp.problem(self.target, var) is not None:
            return None
        base, width, height, pitch, _, ok = td.surf
        depth = self._surf_depth.get(id(ok), 0)
        if len(self._preheaders) <= depth or self.versioned.get(id(ok)) is False:
            return None     # not in a loop of the surface, or in its per-lane version
        pre = self._preheaders[depth]
        coords = (("x", x), ("y", y))
        fixed = tuple((axis, v) for axis, v in coords if self._invariant.get(id(v)) is pre)
        # with immediate offsets the descriptors of one array view share a payload (their blocks
        # a constant apart: one payload write a k-step, not one per block); without, IGC copies
        # a shared payload per block, so each descriptor's surface keeps its own
        surface = (id(td.arr), id(td.H), id(td.W), id(td.s0)) if self.target.block_io.immediate_offsets else id(ok)
        key = (surface, var, id(pre), tuple((axis, id(v)) for axis, v in fixed))
        if key not in self._payloads:
            at = ir.IRBuilder(pre)
            at.position_before(pre.terminator)
            self._payloads[key] = bp.create(at, var, base, width, height, pitch)
            bp.set_coords(at, self._payloads[key], fixed)
            self.instructions["2D block address payload (IGC builtin)"] += 1
        return self._payloads[key], [c for c in coords if c not in fixed]

    #: the largest immediate block offset taken (elements / rows); larger ones stay in the payload
    MAX_IMMEDIATE_OFFSET = 255

    def immediate_offsets(self, xy: tuple) -> tuple[tuple, tuple[int, int]]:
        """((x, y) less their constant parts, (those constants)) for a block message that takes
        immediate offsets; a part invariant in a loop leaves its base invariant there too."""
        out, imm = [], []
        for v in xy:
            base, d = bc.split_small_add(v)
            if d == 0 or abs(d) > self.MAX_IMMEDIATE_OFFSET:
                base, d = v, 0
            if id(v) in self._invariant:
                self._invariant.setdefault(id(base), self._invariant[id(v)])
            out.append(base)
            imm.append(d)
        return tuple(out), tuple(imm)

    def op_xegpu_load_nd(self, op: Operation) -> None:
        td: TD = self.env[id(op.operands[0])]
        t = td.type
        h, w = t.shape
        pad_v = op.attributes.get("padding", 0)
        pad = _const(t.dtype, pad_v)
        rtypes = [r.type for r in op.results]
        mode = load_mode(op)
        b = self.b
        kind = self.block_read_kind(t, mode) if self.target.block_io is None else None
        if kind == "lanerow" and pad_v == 0 and self.only_dpas_uses(op) and 8 * self.dpas_sharing_a(op) >= (
                _DEFERRED_LANE_ROW_WORDS if td.reads_in_bounds else _DEFERRED_WORDS):
            self.load_lane_rows(op, td, t, rtypes)
            return
        if kind is not None and (kind != "lanerow" or td.reads_in_bounds):
            # (a lanerow load outside the fast k-loop: gathered in code below)
            self.load_by_block_reads(op, td, t, rtypes, mode, pad)
            return
        unit = self.unit_ty(rtypes[0])
        per = per_lane_count(rtypes[0].shape, self.sg)
        buf = self.alloca(ir.ArrayType(unit, per * len(rtypes)))

        nb = op.attributes.get("transpose_blocks", 1)

        def in_code() -> None:
            for a, rt in enumerate(rtypes):
                if nb > 1:   # result a: the a-th slice of the memory rows (transposed: columns)
                    self.gather_block(td, rt, b.add(td.row, I64(a * h // nb)), td.col, mode, pad, buf, a * per)
                else:
                    self.gather_block(td, rt, td.row, b.add(td.col, I64(a * w)), mode, pad, buf, a * per)

        if self.target.block_io is not None and pad_v == 0 and td.surf is not None and t.dtype.bitwidth == 8 \
                and self.versioned.get(id(td.surf[5])) is False and self.only_dpas_uses(op):
            # the per-lane version of a k-loop: each 8-bit result gathered at its DPAS, so a
            # k-step's A and B are not all live at once beside the accumulator (int8
            # 256x256x64/32sg, 64x32 tiles: gathered at the load, that version spilled 192 B on
            # pvc, 0 at the DPAS). Not 16-bit: fp16 column-major 256x256x64/32sg spilled 19.7 KB
            # gathered at the DPAS, 1.3 KB at the load (both pruned by the resource model)
            for a, (r, rt) in enumerate(zip(op.results, rtypes)):
                self.env[id(r)] = Deferred(lambda a=a, rt=rt: self.gathered_result(td, rt, h, w, nb, a, mode, pad))
            self.instructions["per-lane gather at its DPAS (per-lane k-loop version)"] += 1
            return
        if self.target.block_io is None or (pad_v != 0 and mode != "plain"):
            if pad_v != 0 and self.target.block_io is not None:
                self.fallbacks.append(f"{op.loc}: load with padding={pad_v}: bounds checked in code "
                                      f"(2D block loads pad with zero; a {mode} load has no select path)")
            self.instructions["load (per-lane, in code)"] += 1
            in_code()
        else:
            bits, bw, bh, cnt = xg.block_params(op)
            kind = xg.block_op_kind(op)
            var = emu.BlockVariant(kind, self.sg, bits, bw, bh, cnt)
            if var.lane_elems() != per * len(rtypes) or var.lane_bits != unit.width:
                raise self.err(op, f"internal: 2D block {kind} gives {var.lane_elems()} x "
                               f"i{var.lane_bits} per lane, the block layout {per * len(rtypes)} x {unit}")
            ap, imm = None, (0, 0)
            if td.xy is not None:
                xy = self.block_xy(td, bits // 8, t.dtype.bitwidth // 8, td.surf[4])
                if self.target.block_io.immediate_offsets:
                    xy, imm = self.immediate_offsets(xy)
                ap = self.payload(td, var, *xy)
            if ap is not None:
                ap, coords = ap
                ok = td.surf[5]
            else:
                f = emu.declare_block_load(self.module, self.target, bits, bw, bh, cnt,
                                           transform=(kind == "load_transform"),
                                           transpose=(kind == "load_transpose"), emulate=self.emulate)
                base, wid, hei, pit, coord, ok = self.surface(td, bits // 8, t.dtype.bitwidth // 8)

            def instruction() -> None:
                if ap is not None:
                    # a coordinate the payload already holds in this block is not set again
                    # (IGC copied the payload for each set, 7 moves a k-step for 8 blocks)
                    held = self._payload_coords.setdefault((id(ap), id(b.block)), {})
                    todo = [(axis, v) for axis, v in coords if held.get(axis) is not v]
                    bp.set_coords(b, ap, todo)
                    held.update(todo)
                    val = bp.load(b, var, ap, imm)
                    b.store(val, b.bitcast(buf, val.type.as_pointer()))
                else:
                    bi.call(b, f, [base, wid, hei, pit, coord, b.bitcast(buf, PRIV)])
                if nb > 1:
                    self.split_transposed_rows(buf, unit, per, nb)
                if pad_v != 0:   # the block pads with zero: out-of-bounds elements take the padding
                    self.pad_out_of_bounds(td, rtypes, w, buf, unit, per, pad)
            self.guarded(ok, instruction, in_code)
            self.instructions[f"2d_block_{kind}"] += 1
            if pad_v != 0:
                self.instructions["select of the padding on out-of-bounds elements"] += 1
        for a, (r, rt) in enumerate(zip(op.results, rtypes)):
            self.env[id(r)] = self.from_buffer(buf, unit, a * per, rt)

    def gathered_result(self, td: TD, rt: VectorType, h: int, w: int, nb: int, a: int, mode: str, pad):
        """Result ``a`` of a load of ``nb`` transposed blocks (else of array blocks ``w`` wide)
        gathered per element into a buffer of its own."""
        b = self.b
        unit = self.unit_ty(rt)
        per = per_lane_count(rt.shape, self.sg)
        buf = self.alloca(ir.ArrayType(unit, per))
        if nb > 1:
            self.gather_block(td, rt, b.add(td.row, I64(a * h // nb)), td.col, mode, pad, buf, 0)
        else:
            self.gather_block(td, rt, td.row, b.add(td.col, I64(a * w)), mode, pad, buf, 0)
        return self.from_buffer(buf, unit, 0, rt)

    def load_lane_rows(self, op: Operation, td: TD, t, rtypes) -> None:
        """A DPAS B operand whose lane l takes memory row l whole (column-major B, ``lanerow``), read
        at each DPAS that takes it (:class:`Deferred`): one per-lane 8-word load per array block,
        so only that block's words are live (8x64 fp16 decode tiles spilled in the fast version
        with all 8 blocks read at the load). Outside the fast version the lane's row is clamped
        and its words selected to zero outside the view, per element only when the columns
        leave it (``lane_row_words``) instead of gathered into a buffer per element (fp16 8x32
        decode tiles, BK=32: 256 B of private memory and 2.1 KB of spill, 0 now; acm-g10).
        Taken where the B blocks of an A operand are wide (``_DEFERRED_LANE_ROW_WORDS``)."""
        w = t.shape[1]
        for a, (r, rt) in enumerate(zip(op.results, rtypes)):
            tda = td.moved(td.row, self.b.add(td.col, I64(a * w)))

            def read(tda=tda, rt=rt):
                if td.reads_in_bounds:
                    return self.words_value(Words(self.lane_row_read(tda, t, 1)[0], rt))
                ld = TLoad("B", tda, 0, w, 1, checked=True)
                words = self.lane_row_words(ld, self.b.zext(self.lane_here(), I64), 0, 8)
                return self.b.bitcast(words, self.vec_ty(rt))
            self.env[id(r)] = Deferred(read, ahead=0 if self.cold_bytes else LANE_ROWS_AHEAD[bool(td.reads_in_bounds)])
        self.instructions["per-lane row load (lanerow) at its DPAS"] += 1

    def split_transposed_rows(self, buf, unit: ir.Type, per: int, nb: int) -> None:
        """A transposed load of nb x sg memory rows leaves word e of a lane at post-transpose
        row e // nb, column lane + sg * (e % nb) (each transposed row fills nb registers, as
        Intel's compiler reads the send's destination: ``ocloc`` ISA of
        ``intel_sub_group_2d_block_read_transpose_32b_32r8x1c``); result a takes every nb-th
        word from a, in ``buf`` order (a shuffle on registers, no memory)."""
        b = self.b
        vt = _vt(unit, per * nb)
        ptr = b.bitcast(buf, vt.as_pointer())
        whole = b.load(ptr, typ=vt)
        for a in range(nb):
            part = b.shuffle_vector(whole, whole,
                                    ir.Constant(_vt(I32, per), [a + nb * i for i in range(per)]))
            b.store(part, b.bitcast(b.gep(buf, [I32(a * per)]), _vt(unit, per).as_pointer()))

    def pad_out_of_bounds(self, td: TD, rtypes, w: int, buf, unit: ir.Type, per: int, pad: ir.Value) -> None:
        """Replace the out-of-bounds elements of a plain block load in ``buf`` by ``pad``: one
        compare and select per element, on registers (the buffer's indices are constants)."""
        b = self.b
        ety = reg_type(rtypes[0].dtype)
        for a, rt in enumerate(rtypes):
            for e in range(per):
                r, c = self.coords(tuple(rt.shape), e)
                r, c = b.add(td.row, r), b.add(b.add(td.col, I64(a * w)), c)
                inb = b.and_(b.and_(b.icmp_signed(">=", r, I64(0)), b.icmp_signed("<", r, td.H)),
                             b.and_(b.icmp_signed(">=", c, I64(0)), b.icmp_signed("<", c, td.W)))
                slot = b.gep(buf, [I32(a * per + e)], source_etype=unit)
                v = b.bitcast(b.load(slot, typ=unit), ety)
                b.store(b.bitcast(b.select(inb, v, pad), unit), slot)

    def load_by_block_reads(self, op: Operation, td: TD, t, rtypes, mode: str, pad) -> None:
        """No 2D block IO (dg2): subgroup block reads of whole rows into registers, unchecked in
        the fast version of a k-loop versioned on them (codegen/block_reads.py). Elsewhere a DPAS
        operand is gathered per element without branches (at its DPAS when that is in the same
        block: :class:`Deferred`), any other load reads each row behind a bounds test."""
        if self.dplan is not None and not self.dplan.spread and id(op.operands[0]) in self.dplan.parts and td.reads_in_bounds:
            self.decode_a_load(op, td, rtypes)      # A staged in SLM (decode_slm.py)
            return
        kind = self.block_read_kind(t, mode)
        role = self.tplan.loads.get(id(op)) if self.tplan is not None and td.reads_in_bounds is not None else None
        if role is not None:     # C^T = B^T A^T: per-lane row loads when a DPAS asks (transposed_dpas.py)
            cache: dict = {}
            slm = self.splan.parts.get(id(op.operands[0])) if self.splan and role == "B" and td.reads_in_bounds else None
            for a, r in enumerate(op.results):
                self.env[id(r)] = TLoad(role, td, a, t.shape[1], len(rtypes), cache, not td.reads_in_bounds, slm)
            if td.reads_in_bounds and self.dplan is not None and op.operands[0] is self.dplan.arg:
                self.decode_spread_stage(td)      # the A^T spread staged in SLM (decode_slm.py)
            elif td.reads_in_bounds:
                # every operand of the k-step at its load, not at its first DPAS: the DPAS run as
                # fewer chains (Intel's compiler puts a dummy DPAS and scoreboard syncs ahead of
                # each): fp16 256x64x32/64sg 81 -> 76 instructions a step, int8 60 -> 55
                v = 1 if role == "A" else 32 // t.dtype.bitwidth
                for r in op.results:
                    for g in range(t.shape[0] // (8 * v)):
                        s = TSlice(self.env[id(r)], g)
                        if role == "A":
                            self.a_transposed(s)
                        elif not self.tplan.pairs or slm is not None:
                            # (B rows by column parity are read at their DPAS: all of 8x32 tiles'
                            # at BK=32 here spilled 864 B, 0 at the DPAS: parity_dpas.py)
                            self.b_transposed(s)
            return
        many = sum(words_count(rt, self.sg) for rt in rtypes) >= (_DEFERRED_WORDS // 2 if self.cold_bytes else _DEFERRED_WORDS)
        if not td.reads_in_bounds and many and self.only_dpas_uses(op):
            # not the fast version: each array block gathered per element at its DPAS, without
            # branches. Attention fwd on dg2 (D=64 fp16, V 16x64 a subgroup) spilled 3424 B with
            # per-row block-read-or-gather branches (their phis hold all 64 words of V at once),
            # 3936 B gathered where the load is, 0 at the DPAS (the fast version keeps reads)
            w = t.shape[1]
            for a, (r, rt) in enumerate(zip(op.results, rtypes)):
                tda = td.moved(td.row, self.b.add(td.col, I64(a * w)))
                self.env[id(r)] = Deferred(lambda tda=tda, rt=rt: self.words_value(
                    self.gathered_words(tda, t, rt, mode, pad)))
            self.instructions[f"per-element gather ({kind}) at its DPAS"] += 1
            return
        if td.reads_in_bounds:
            vals = self.block_read_words(td, t, rtypes, mode, per_block=self.only_dpas_uses(op))
            self.instructions[f"subgroup block read ({kind})"] += 1
        elif all(u.name == "xegpu.dpas" for r in op.results for u, _ in r.uses):
            # a DPAS operand outside the loop (attention's Q): gathered without branches too
            # (per-row branches: 32 B spill in attention fwd, above)
            vals = self.block_read_words(td, t, rtypes, mode, pad, gather=True)
            self.instructions[f"per-element gather ({kind}) of a DPAS operand"] += 1
        else:   # a bounds test per row
            vals = self.block_read_words(td, t, rtypes, mode, pad)
            self.instructions[f"subgroup block read ({kind}) per row, bounds-checked"] += 1
        for r, x in zip(op.results, vals):
            self.env[id(r)] = self.words_value(x)

    @staticmethod
    def dpas_sharing_a(op: Operation) -> int:
        """How many DPAS of ``op``'s block take the A operand of the first DPAS using ``op``'s
        first result as their B operand (the B blocks live per A operand)."""
        users = [u for u, i in op.results[0].uses if u.name == "xegpu.dpas" and i == 1]
        if not users:
            return 0
        a = users[0].operands[0]
        return sum(1 for o in op.parent.ops if o.name == "xegpu.dpas" and o.operands[0] is a)

    @staticmethod
    def only_dpas_uses(op: Operation) -> bool:
        """Every result of ``op`` is taken by DPAS ops of its own block only, and nothing between
        the load and the last of them writes memory, synchronizes or holds a region: reading the
        block at its DPAS reads what the load would have."""
        blk = op.parent
        users = [u for r in op.results for u, _ in r.uses]
        if blk is None or not users or any(u.name != "xegpu.dpas" or u.parent is not blk for u in users):
            return False
        ops = blk.ops
        start, last = ops.index(op), max(ops.index(u) for u in users)
        return not any(o.regions or any(k in o.name for k in ("store", "atomic", "barrier", "fence", "call"))
                       for o in ops[start + 1:last])

    def op_xegpu_store_nd(self, op: Operation) -> None:
        x = self.value(op.operands[0])
        td: TD = self.env[id(op.operands[1])]
        vt: VectorType = op.operands[0].type
        b = self.b
        if self.target.block_io is None:
            self.instructions["store (per-lane, in code)"] += 1
            self.scatter_block(td, vt, x, td.row, td.col)
            return
        bits, bw, bh, cnt = xg.block_params(op)
        f = emu.declare_block_store(self.module, self.target, bits, bw, bh, cnt, emulate=self.emulate)
        var = emu.BlockVariant("store", self.sg, bits, bw, bh, cnt)
        lane_ty = ir.IntType(var.lane_bits)
        buf = self.alloca(ir.VectorType(lane_ty, var.lane_elems()))
        base, wid, hei, pit, coord, ok = self.surface(td, bits // 8, bits // 8)

        def instruction():
            lvt = _vt(lane_ty, var.lane_elems())
            b.store(b.bitcast(x, lvt), b.bitcast(buf, lvt.as_pointer()))
            bi.call(b, f, [b.bitcast(buf, PRIV), base, wid, hei, pit, coord])
        self.guarded(ok, instruction, lambda: self.scatter_block(td, vt, x, td.row, td.col))
        self.instructions["2d_block_store"] += 1

    def op_xegpu_prefetch_nd(self, op: Operation) -> None:
        td: TD = self.env[id(op.operands[0])]
        if self.target.block_io is None:
            return
        bits, bw, bh, cnt = xg.block_params(op)
        var = emu.BlockVariant("prefetch", self.sg, bits, bw, bh, cnt)
        rng = op.attributes.get("subgroups")
        if rng is not None:
            if id(op) in self._merged_prefetches or self.merged_prefetch(op, td, var):
                return
            sg = bi.sub_group_id(self.b)
            mine = self.b.and_(self.b.icmp_unsigned(">=", sg, I32(rng[0])), self.b.icmp_unsigned("<", sg, I32(rng[1])))
            with self.b.if_then(mine):
                self._prefetch(td, var)
            return
        self._prefetch(td, var)

    def merged_prefetch(self, op: Operation, td: TD, var: emu.BlockVariant) -> bool:
        """In the fast version of a k-loop, ``op`` and the prefetch of its block for the other
        subgroups (``subgroups`` ranges of ``passes.pipelining.split_prefetch``) as one message
        per subgroup: a payload on either surface, chosen by the subgroup once before the loop,
        moved in place each k-step. Two prefetches per subgroup cost pvc 11 instructions per
        k-step (two sends, two coordinates, and 3 no-op payload reads each from IGC's
        insertPVCWA before the payloads are rewritten), one costs 7. False when not applicable."""
        others = [o for o in op.parent.ops if o is not op and o.name == "xegpu.prefetch_nd"
                  and o.attributes.get("subgroups") is not None]
        if len(others) != 1 or self.emulate or not self._preheaders:
            return False
        other = others[0]
        tds = [td, self.env.get(id(other.operands[0]))]
        if not all(isinstance(t, TD) and t.counter is not None and t.surf is not None and
                   self.versioned.get(id(t.surf[5])) is True and t.type.dtype.bitwidth == var.elem_bits
                   for t in tds) or xg.block_params(other) != xg.block_params(op) or \
                bp.problem(self.target, var) is not None:
            return False
        lo, hi = op.attributes["subgroups"]
        pre = self._preheaders[-1]
        at = ir.IRBuilder(pre)
        at.position_before(pre.terminator)
        sg = bi.sub_group_id(at)
        mine = at.and_(at.icmp_unsigned(">=", sg, I32(lo)), at.icmp_unsigned("<", sg, I32(hi)))
        pick = [at.select(mine, a, b) for a, b in zip(tds[0].surf[:4], tds[1].surf[:4])]
        ap = bp.create(at, var, *pick)
        (x0, y0, dy, dx), (x1, y1, dy1, dx1) = tds[0].counter, tds[1].counter
        bp.set_xy(at, ap, at.select(mine, x0, x1), at.select(mine, y0, y1))
        bp.prefetch(self.b, var, ap)
        n = self.nsg
        if lo == 0 and 2 * hi == n and hi & (hi - 1) == 0:
            # the second range's subgroups have bit log2(hi) set: the steps from it by arithmetic
            # (a select of two constants became a bool IGC rebuilt in the loop, 4 moves a k-step)
            other_half = at.lshr(sg, I32(hi.bit_length() - 1))
            step = lambda a, c: at.add(I32(a), at.mul(other_half, I32(c - a)))  # noqa: E731
        else:
            step = lambda a, c: at.select(mine, I32(a), I32(c))  # noqa: E731
        moves = [(axis, I32(a) if a == c else step(a, c))
                 for axis, a, c in (("x", dx, dx1), ("y", dy, dy1)) if a or c]
        bp.add_coords(self.b, ap, moves)
        self._merged_prefetches.update((id(op), id(other)))
        self.instructions["2D block address payload (IGC builtin)"] += 1
        self.instructions["prefetches of two tiles as one message per subgroup"] += 1
        return True

    def _prefetch(self, td: TD, var: emu.BlockVariant) -> None:
        bits, bw, bh, cnt = var.elem_bits, var.width, var.height, var.count
        ap = self.payload(td, var, *self.block_xy(td, bits // 8, bits // 8, td.surf[4])) \
            if td.xy is not None else None
        if ap is not None:
            ap, coords = ap

            def instruction() -> None:
                bp.set_coords(self.b, ap, coords)
                bp.prefetch(self.b, var, ap)
            self.guarded(td.surf[5], instruction, lambda: None)
        else:
            f = emu.declare_block_prefetch(self.module, self.target, bits, bw, bh, cnt,
                                           emulate=self.emulate)
            base, wid, hei, pit, coord, ok = self.surface(td, bits // 8, bits // 8)
            self.guarded(ok, lambda: bi.call(self.b, f, [base, wid, hei, pit, coord]), lambda: None)
        self.instructions["2d_block_prefetch"] += 1

    def _elems(self, v: ir.Value) -> list:
        if isinstance(v.type, ir.VectorType):
            return [self.b.extract_element(v, I32(e)) for e in range(v.type.count)]
        return [v]

    def _masked_access(self, op: Operation, gtd: "GTD", mask: ir.Value, store: Optional[ir.Value]):
        """Per-element gather (store is None) or scatter through element offsets under a mask."""
        b = self.b
        ety = reg_type(gtd.type.dtype)
        offs, ms = self._elems(gtd.offsets), self._elems(mask)
        span = self._span[id(gtd.arr)]     # gathers and scatters stay inside the array's memory
        inside = [in_span(b, o, span) if self.span_checks else ir.Constant(ir.IntType(1), 1) for o in offs]
        if self.debug_sites is not None:   # XEJIT_DEBUG=1: report an unmasked lane out of range
            kind = "load_gather" if store is None else "store_scatter"
            self.debug_sites.append(bounds_debug.site_record(op, kind, self._arr_name[id(gtd.arr)]))
            for o, m, ok in zip(offs, ms, inside):
                bounds_debug.emit_report(b, self.kernel.args[-1], len(self.debug_sites) - 1, b.and_(m, b.not_(ok)), o)
        ms = [b.and_(m, ok) for m, ok in zip(ms, inside)]
        if store is None:
            pad = _const(gtd.type.dtype, op.attributes.get("padding", 0))
            vals = []
            for off, m in zip(offs, ms):
                ptr = b.gep(gtd.arr.ptr, [b.select(m, off, I64(0))], source_etype=ety)
                vals.append(b.select(m, b.load(ptr, typ=ety), pad))
            if len(vals) == 1:
                return vals[0]
            out = ir.Constant(ir.VectorType(ety, len(vals)), ir.Undefined)
            for e, v in enumerate(vals):
                out = b.insert_element(out, v, I32(e))
            return out
        for off, m, v in zip(offs, ms, self._elems(store)):
            with b.if_then(m):
                b.store(v, b.gep(gtd.arr.ptr, [off], source_etype=ety))
        return None

    def op_xegpu_load_gather(self, op: Operation) -> None:
        td = self.env[id(op.operands[0])]
        if isinstance(td, GTD):
            self.env[id(op.result)] = self._masked_access(op, td, self.value(op.operands[1]), None)
            self.instructions["gather load (per-lane)"] += 1
            return
        if len(op.operands) > 1:
            raise self.err(op, "masked block gathers are not supported on DPAS targets yet")
        pad = _const(td.type.dtype, op.attributes.get("padding", 0))
        mode = "packed" if op.attributes.get("packed") else "plain"
        rt = op.result.type
        unit = self.unit_ty(rt)
        buf = self.alloca(ir.ArrayType(unit, per_lane_count(rt.shape, self.sg)))
        self.gather_block(td, rt, td.row, td.col, mode, pad, buf, 0)
        self.env[id(op.result)] = self.from_buffer(buf, unit, 0, rt)
        self.instructions["gather load (per-lane)"] += 1

    def op_xegpu_store_scatter(self, op: Operation) -> None:
        td = self.env[id(op.operands[1])]
        if isinstance(td, GTD):
            self._masked_access(op, td, self.value(op.operands[2]), self.value(op.operands[0]))
            self.instructions["scatter store (per-lane)"] += 1
            return
        if len(op.operands) > 2:
            raise self.err(op, "masked block scatters are not supported on DPAS targets yet")
        td: TD = self.env[id(op.operands[1])]
        self.scatter_block(td, op.operands[0].type, self.env[id(op.operands[0])], td.row, td.col)
        self.instructions["scatter store (per-lane)"] += 1

    # -- reductions and atomics (combine / identity / cas_loop from LoweringBase) -------------------


    def _bcast_lane(self, v: ir.Value, lane) -> ir.Value:
        return bi.shuffle(self.b, v, lane, "f32") if v.type == F32 else self._shuffle_any(v, lane)

    def op_xetile_tile_reduce(self, op: Operation) -> None:
        """A register block [h, w] reduced along dim 1 to [h, 1] (lane r holds row r): in-register
        over the lane's elements of a row, then (w >= S) one transposing shuffle butterfly for
        all rows (``reduce_rows_across_lanes``) and row r moved to lane r, or (w < S) a
        shuffle-xor butterfly per lane row group."""
        src_t: VectorType = op.operands[0].type
        dims = list(op.attributes.get("dims", []))
        if dims not in ([0], [1]) or len(src_t.shape) != 2:
            raise self.err(op, f"tile_reduce over dims {dims} of {src_t} is not supported on "
                               f"{self.target.name}")
        if dims == [0]:
            return self._reduce_columns(op)
        kind = op.attributes["kind"]
        et = src_t.dtype
        h, w = src_t.shape
        sg = self.sg
        b = self.b
        xs = self._elems(self.value(op.operands[0]))
        if et.is_float:
            xs = [self.to_f32(x, et) for x in xs]
        lane = self.lane
        totals = []
        if h > sg:
            raise self.err(op, f"internal: a reduced column of {h} rows over {sg} lanes")
        if w >= sg:
            ept = w // sg
            partial = []
            for r in range(h):
                acc = xs[r * ept]
                for k in range(1, ept):
                    acc = self.combine(kind, et, acc, xs[r * ept + k])
                partial.append(acc)
            v, shift = self.reduce_rows_across_lanes(partial, kind, et, lane, sg, self._bcast_lane)
            if shift:   # row r sits in lanes r << shift: move it to lane r (lanes past h: row 0)
                src = b.select(b.icmp_unsigned("<", lane, I32(h)), b.shl(lane, I32(shift)), I32(0))
                v = self._bcast_lane(v, src)
            totals = [v]
        else:
            rpg = sg // w
            red = []
            for x in xs:
                step = 1
                while step < w:
                    x = self.combine(kind, et, x, self._bcast_lane(x, b.xor(lane, I32(step))))
                    step *= 2
                red.append(x)
            for r in range(h):
                x = red[r // rpg]
                totals.append(x if rpg == 1 else self._bcast_lane(x, I32((r % rpg) * w)))
        out = totals[0]
        for r in range(1, len(totals)):
            out = b.select(b.icmp_unsigned("==", lane, I32(r)), totals[r], out)
        if et.is_float:
            out = self.from_f32(out, et)
        n = per_lane_count(op.result.type.shape, sg)
        if n != 1:
            raise self.err(op, f"internal: a reduced column of {h} rows over {sg} lanes")
        self.env[id(op.result)] = out
        self.instructions["subgroup reduction (shuffle butterfly)"] += 1

    def _reduce_columns(self, op: Operation) -> None:
        """A register block [h, w] reduced along dim 0 to [1, w]: each lane combines the rows it
        holds (rows past h, in lanes of a narrow block, count as the identity); for w < S the
        rows are spread over S/w lane groups, combined with a shuffle-xor butterfly."""
        src_t: VectorType = op.operands[0].type
        kind, et = op.attributes["kind"], src_t.dtype
        h, w = src_t.shape
        sg, b = self.sg, self.b
        xs = self._elems(self.value(op.operands[0]))
        if et.is_float:
            xs = [self.to_f32(x, et) for x in xs]
        if w > sg:
            ept = w // sg
            cols = []
            for k in range(ept):
                acc = xs[k]
                for r in range(1, h):
                    acc = self.combine(kind, et, acc, xs[r * ept + k])
                cols.append(acc)
        else:
            rpg = sg // w
            ident = self.identity(kind, et)
            acc = None
            for e, x in enumerate(xs):
                if (e + 1) * rpg > h:     # some lanes hold a row past the block
                    row, _ = self.coords((h, w), e)
                    x = b.select(b.icmp_unsigned("<", row, I64(h)), x, ident)
                acc = x if acc is None else self.combine(kind, et, acc, x)
            step = w
            while step < sg:
                acc = self.combine(kind, et, acc, self._bcast_lane(acc, b.xor(self.lane, I32(step))))
                step *= 2
            cols = [acc]
        if et.is_float:
            cols = [self.from_f32(c, et) for c in cols]
        n = per_lane_count(op.result.type.shape, sg)
        if n != len(cols):
            raise self.err(op, f"internal: a reduced row of {w} columns over {sg} lanes")
        out = cols[0]
        if n > 1:
            out = ir.Constant(ir.VectorType(cols[0].type, n), ir.Undefined)
            for k, c in enumerate(cols):
                out = b.insert_element(out, c, I32(k))
        self.env[id(op.result)] = out
        self.instructions["column reduction (in-lane" + (", shuffles)" if w < sg else ")")] += 1

    # -- shared local memory ---------------------------------------------------------------------

    def op_gpu_slm_alloc(self, op: Operation) -> None:
        t = op.result.type
        ty = reg_type(t.dtype)
        h, w = t.shape
        self.env[id(op.result)] = (bi.slm_array(self.module, ty, h * w), w, ty)
        self.instructions[f"SLM buffer {h}x{w}x{t.dtype}"] += 1

    def op_gpu_barrier(self, op: Operation) -> None:
        bi.barrier(self.b)
        self.instructions["workgroup barrier"] += 1

    def _slm_elems(self, op: Operation, t: VectorType, buf, r0, c0, tr: bool):
        """(pointer, in-block flag or None) of each of this lane's elements of block ``t`` in an
        SLM window at (r0, c0) (transposed windows: element (r, c) at buffer (r0 + c, c0 + r))."""
        if len(t.shape) != 2:
            raise self.err(op, f"a {t} block cannot be moved through SLM on {self.target.name}")
        arr, W, ty = buf
        h, w = t.shape
        b = self.b
        out = []
        for e in range(per_lane_count(t.shape, self.sg)):
            r, c = self.coords((h, w), e)
            ok = None
            if w <= self.sg and (e + 1) * (self.sg // w) > h:
                ok = b.icmp_unsigned("<", r, I64(h))
                r = b.select(ok, r, I64(0))
            row, col = (b.add(r0, c), b.add(c0, r)) if tr else (b.add(r0, r), b.add(c0, c))
            out.append((b.gep(arr, [b.add(b.mul(row, I64(W)), col)], source_etype=ty), ok))
        return out

    def _slm_packed_words(self, op: Operation, t: VectorType, buf, r0, c0, tr: bool) -> list:
        """A VNNI-packed DPAS B block [K/v, N, v] read from SLM: lane l holds column l, word e
        packs rows e*v .. e*v+v-1 (lower row in lower bits), as a VNNI 2D block load gives it."""
        kv, w, v = t.shape
        if w != self.sg:
            raise self.err(op, f"a packed {t} block needs {self.sg} columns on {self.target.name}")
        arr, W, ty = buf
        b = self.b
        bits = t.dtype.bitwidth
        col = b.zext(self.lane, I64)
        words = []
        for e in range(kv):
            xs = []
            for j in range(v):
                r = I64(e * v + j)
                row, cc = (b.add(r0, col), b.add(c0, r)) if tr else (b.add(r0, r), b.add(c0, col))
                x = b.load(b.gep(arr, [b.add(b.mul(row, I64(W)), cc)], source_etype=ty), typ=ty)
                xs.append(x if isinstance(ty, ir.IntType) else b.bitcast(x, ir.IntType(bits)))  # f16 as bits
            words.append(self.pack_word(xs))
        return words

    def pack_word(self, xs: list) -> ir.Value:
        """One 32-bit word of narrower integers, the first in the lowest bits (VNNI / memory order)."""
        return bi.pack_word(self.b, xs)

    def op_gpu_slm_store(self, op: Operation) -> None:
        t: VectorType = op.operands[0].type
        buf = self.env[id(op.operands[1])]
        r0, c0 = (self.env[id(v)] for v in op.operands[2:])
        xs = self._elems(self.value(op.operands[0]))
        for x, (ptr, ok) in zip(xs, self._slm_elems(op, t, buf, r0, c0, False)):
            if ok is None:
                self.b.store(x, ptr)
            else:
                with self.b.if_then(ok):
                    self.b.store(x, ptr)
        self.instructions["SLM store (per lane)"] += 1

    def op_gpu_slm_load(self, op: Operation) -> None:
        t: VectorType = op.result.type
        buf = self.env[id(op.operands[0])]
        r0, c0 = (self.env[id(v)] for v in op.operands[1:])
        tr = bool(op.attributes.get("transpose"))
        ty = buf[2]
        if len(t.shape) == 3:
            vals = self._slm_packed_words(op, t, buf, r0, c0, tr)
            ty = I32
        else:
            vals = [self.b.load(ptr, typ=ty) for ptr, _ in self._slm_elems(op, t, buf, r0, c0, tr)]
        if self.vec_ty(t) is None:    # more than 16 per lane (int8 DPAS A on dg2): a private buffer
            # of 32-bit words (LLVM promotes the buffer to a vector, and the SPIR-V backend cannot
            # legalize a <32 x i8> phi), consumed by the DPAS like a block load's buffer
            unit = self.unit_ty(t)
            b = self.b
            ints = [v if v.type == unit else b.bitcast(v, unit) for v in vals]
            per = 32 // unit.width
            words = [self.pack_word(ints[w:w + per]) for w in range(0, len(ints), per)]
            pbuf = self.alloca(ir.ArrayType(I32, len(words)))
            for k, wd in enumerate(words):
                b.store(wd, b.gep(pbuf, [I32(k)]))
            self.env[id(op.result)] = Lazy(pbuf, I32, 0, t)
            self.instructions["SLM load (per lane)" + (", transposed" if tr else "")] += 1
            return
        out = vals[0]
        if len(vals) > 1:
            out = ir.Constant(ir.VectorType(ty, len(vals)), ir.Undefined)
            for k, v in enumerate(vals):
                out = self.b.insert_element(out, v, I32(k))
        self.env[id(op.result)] = out
        self.instructions["SLM load (per lane)" + (", transposed" if tr else "")] += 1

    def op_xegpu_atomic_rmw(self, op: Operation) -> None:
        """Per-lane atomics on the elements this lane owns of a block-scattered descriptor:
        ``atomicrmw`` for 32/64-bit integers, a compare-and-swap loop on the bits for f32."""
        td = self.env[id(op.operands[0])]
        if not isinstance(td, TD):
            raise self.err(op, "atomic_rmw needs a block-form scattered descriptor on DPAS targets")
        kind = op.attributes["kind"]
        t: VectorType = op.operands[2].type
        et = t.dtype
        if et.is_float and (et.name != "f32" or kind not in ("add", "max", "min", "mul", "xchg")):
            raise self.err(op, f"atomic_rmw_tile <{kind}> on {et} is not supported")
        if not et.is_float and et.bitwidth not in (32, 64):
            raise self.err(op, f"atomic_rmw_tile on {et}: only 32/64-bit integers are supported")
        llop = None
        if not et.is_float:
            llop = {"add": "add", "max": "max" if et.is_signed else "umax",
                    "min": "min" if et.is_signed else "umin", "and": "and", "or": "or",
                    "xor": "xor", "xchg": "xchg"}.get(kind)
            if llop is None:
                raise self.err(op, f"atomic_rmw_tile <{kind}> on {et} is not supported")
        b = self.b
        ety = reg_type(et)
        h, w = t.shape
        vals = self._elems(self.value(op.operands[2]))
        masks = self._elems(self.value(op.operands[1]))
        olds = []
        for e, v in enumerate(vals):
            r, c = self.coords((h, w), e)
            ptr, ok = self.elem_ptr(td, b.add(td.row, r), b.add(td.col, c), ety)
            ok = b.and_(ok, masks[e] if e < len(masks) else masks[0])
            if w <= self.sg and h % (self.sg // w):   # lanes past the last row hold nothing
                ok = b.and_(ok, b.icmp_unsigned("<", r, I64(h)))
            pre = b.block
            with b.if_then(ok):
                old = self.cas_loop(ptr, v, kind) if et.is_float else \
                    b.atomic_rmw(llop, ptr, v, "monotonic")
                inner = b.block
            phi = b.phi(ety)
            phi.add_incoming(old, inner)
            phi.add_incoming(ir.Constant(ety, 0), pre)
            olds.append(phi)
        if len(olds) == 1:
            res = olds[0]
        else:
            res = ir.Constant(ir.VectorType(ety, len(olds)), ir.Undefined)
            for e, o in enumerate(olds):
                res = b.insert_element(res, o, I32(e))
        self.env[id(op.result)] = res
        self.instructions["atomic CAS loop (f32, per lane)" if et.is_float else f"atomicrmw {llop} (per lane)"] += 1

    # -- DPAS -------------------------------------------------------------------------------------

    def round_tf32(self, x: ir.Value) -> ir.Value:
        """f32 -> tf32 precision, round-to-nearest-even on the 13 dropped mantissa bits."""
        b = self.b
        u = b.bitcast(x, I32)
        r = b.add(b.add(u, I32(0xFFF)), b.and_(b.lshr(u, I32(13)), I32(1)))
        return b.bitcast(b.and_(r, I32(0xFFFFE000 - (1 << 32))), F32)

    def software_mma(self, op: Operation) -> None:
        """C + A @ B in f32 FMAs: A's elements broadcast with subgroup shuffles from the lanes
        its block layout puts them in (lane k + w*(m % r), component m // r, r = S / w).

        The k steps are an LLVM loop (the M accumulators its phis, B's row k read with a run-time
        extract): unrolled, a 256x256 fp32 workgroup tile on pvc was 4096 shuffles + FMAs per k
        step and the CPU driver built it for minutes (examples/gemm.py); Intel's compiler still
        unrolls a loop of constant trip count where it pays."""
        b = self.b
        a_t: VectorType = op.operands[0].type
        m_, k_ = a_t.shape
        n_ = op.result.type.shape[1]
        if k_ > self.sg or n_ != self.sg:
            raise self.err(op, f"software multiply-accumulate needs K <= {self.sg} and N = {self.sg}")
        a = self._elems(self.value(op.operands[0]))
        bvec = self.value(op.operands[1])                        # this lane's column n, rows k
        if len(op.operands) == 3:
            acc = self._elems(self.value(op.operands[2]))
        else:
            acc = [F32(0.0)] * m_
        tf32 = op.attributes.get("input_precision") == "tf32"   # same rounding as the interpreter
        if tf32:
            a = [self.round_tf32(x) for x in a]
        rpg = self.sg // k_
        fma = self.module.globals.get("llvm.fma.f32") or ir.Function(
            self.module, ir.FunctionType(F32, [F32, F32, F32]), "llvm.fma.f32")

        def step(k: ir.Value, bk: ir.Value, cs: list) -> list:
            bk = self.round_tf32(bk) if tf32 else bk
            return [b.call(fma, [bi.shuffle(b, a[m // rpg], b.add(k, I32(k_ * (m % rpg))) if m % rpg else k, "f32"),
                                 bk, cs[m]]) for m in range(m_)]

        if k_ == 1:
            out = step(I32(0), bvec, acc)
        else:
            out = counted_loop(b, k_, acc, lambda k, cs: step(k, b.extract_element(bvec, k), cs), name="fma.k")
        if m_ == 1:
            self.env[id(op.result)] = out[0]
            return
        res = ir.Constant(ir.VectorType(F32, m_), ir.Undefined)
        for m, c in enumerate(out):
            res = b.insert_element(res, c, I32(m))
        self.env[id(op.result)] = res
        self.instructions["fma multiply-accumulate (no DPAS)"] += 1

    def read_next_ahead(self, op: Operation) -> None:
        """The B operand of the block's next DPAS read now when it is a :class:`Deferred` to be
        read ahead: its load is issued before this DPAS, into a second register block (read at
        its own DPAS, every B block of an 8x64 decode tile landed in one register block, and
        Intel's compiler waited on the previous DPAS before each load: 1-2 syncs a DPAS)."""
        ops = self._order.get(id(op.parent), op.parent.ops)     # the order lowered (slm_op_order)
        i = next(j for j, o in enumerate(ops) if o is op)
        nxt = [o for o in ops[i + 1:] if o.name == "xegpu.dpas"][:max(LANE_ROWS_AHEAD)]
        for j, o in enumerate(nxt):
            d = self.env.get(id(o.operands[1]))
            if isinstance(d, Deferred) and d.ahead > j:
                self.env[id(o.operands[1])] = d.read()

    def op_xegpu_dpas(self, op: Operation) -> None:
        if op.attributes.get("software"):
            self.software_mma(op)
            return
        a_t: VectorType = op.operands[0].type
        m = a_t.shape[0]
        ty = xg.dpas_type_name(a_t.dtype)
        acc = "i32" if op.result.type.dtype.is_int else "f32"
        f = emu.declare_dpas(self.module, self.target, ty, ty, acc, m, emulate=self.emulate)
        at, bt, ct = f.function_type.args
        b = self.b
        for v in op.operands[:2]:
            if isinstance(self.env[id(v)], Deferred):     # read here (load_by_block_reads)
                self.env[id(v)] = self.env[id(v)].read()
        self.read_next_ahead(op)
        ta = self.transposed_slice(self.env[id(op.operands[0])])
        if ta is not None:       # C^T += B^T A^T: B^T is the DPAS A operand (transposed_dpas.py)
            tb = self.transposed_slice(self.env[id(op.operands[1])])
            if self.tplan.pairs and tb.load.slm is None:      # B unpacked, by column parity
                self.parity_dpas(op, ta, tb, f)
                return
            r = bi.call(b, f, [b.bitcast(self.b_transposed(tb), at), b.bitcast(self.a_transposed(ta), bt),
                               b.bitcast(self.env[id(op.operands[2])], ct)])
            self.env[id(op.result)] = b.bitcast(r, self.vec_ty(op.result.type))
            self.instructions["dpas (transposed: C^T += B^T A^T)"] += 1
            self.slm_after_dpas()
            return
        a, bb = (self.load_private(b.gep(x.buf, [I32(x.off)]), ty) if isinstance(x, Lazy) else
                 b.bitcast(self.words_vector(x.words), ty) if isinstance(x, Words) else b.bitcast(x, ty)
                 for x, ty in ((self.env[id(op.operands[0])], at), (self.env[id(op.operands[1])], bt)))
        if len(op.operands) == 3:
            c = b.bitcast(self.env[id(op.operands[2])], ct)
        else:
            c = ir.Constant(ct, None)
        r = bi.call(b, f, [a, bb, c])
        self.env[id(op.result)] = b.bitcast(r, self.vec_ty(op.result.type))
        self.instructions["dpas"] += 1

    # -- synchronization ------------------------------------------------------------------------

    def op_xegpu_fence(self, op: Operation) -> None:
        raise self.err(op, "fences are not lowered yet on DPAS targets")

    # -- loops ------------------------------------------------------------------------------------

    @staticmethod
    def _flat(x) -> list:
        if isinstance(x, TD):
            return [x.row, x.col] + list(x.xy or ())
        if isinstance(x, Words):
            return list(x.words)
        return [x]

    @staticmethod
    def _rebuild(like, vals):
        if isinstance(like, TD):
            return like.moved(vals[0], vals[1], tuple(vals[2:4]) if like.xy is not None else None)
        if isinstance(like, Words):
            return Words(list(vals), like.type)
        return vals[0]

    def _join_versions(self, versions: list) -> list:
        """The loop's results where its two versions ``[(results, end block), ...]`` meet: a phi
        per flat value (the first version's structure is kept)."""
        b = self.b
        (ra, ba), (rb, bb_) = versions
        results = []
        for like_a, like_b in zip(ra, rb):
            merged = join_phis(b, self._flat(like_a), ba, self._flat(like_b), bb_)
            results.append(self._rebuild(like_a, merged))
        return results

    def op_scf_for(self, op: Operation) -> None:
        """A loop; on real 2D block targets a k-loop is versioned on its descriptors' surface
        checks (hoisted), so the fast version holds only 2D block instructions and DPAS and
        the other only per-lane code -- no branch per instruction inside the loop."""
        b = self.b
        inits = [self.env[id(v)] for v in op.operands[3:]]
        oks = [x.surf[5] for x in inits if isinstance(x, TD) and x.surf is not None]
        oks = [ok for ok in dict.fromkeys(oks) if id(ok) not in self.versioned]
        reads = self.block_read_loop_descriptors(op) if self.target.block_io is None else {}
        if reads:
            results = self._versioned_on_block_reads(op, reads)
        elif not oks or not self.version_loops:
            results = self._lower_for(op)
        else:
            all_ok = oks[0]
            for ok in oks[1:]:
                all_ok = b.and_(all_ok, ok)
            lb, ub, step = (self.env[id(v)] for v in op.operands[:3])
            steps = None
            if isinstance(step, ir.Constant) and 0 < step.constant <= bc.LOOP_DRIFT:
                # the fast version counts in i32 and moves its descriptors with the counter:
                # its span must keep the counter and the moves within LOOP_DRIFT
                steps = bc.loop_steps(op, step.constant, self.env)
                most = max([1] + [abs(m) for mv in steps.values() for m in mv])
                all_ok = b.and_(all_ok, b.icmp_signed("<=", b.sub(ub, lb), I64(bc.LOOP_DRIFT // most)))
            versions = []
            with b.if_else(all_ok) as (then, otherwise):
                for ctx, mode in ((then, True), (otherwise, False)):
                    with ctx:
                        self.versioned.update({id(ok): mode for ok in oks})
                        counted = Counter(self.instructions)
                        versions.append((self._lower_for(op, steps if mode else None), b.block))
                        if not mode:     # the report counts the 2D block version's instructions
                            self.instructions = counted
            for ok in oks:
                del self.versioned[id(ok)]
            self.instructions["k-loop versioned on 2D block surface checks (width/pitch >= 64 B)"] += 1
            results = self._join_versions(versions)
        for r, v in zip(op.results, results):
            self.env[id(r)] = v

    def block_read_loop_descriptors(self, op: Operation) -> dict:
        """{iter_arg position: (descriptor, row step, column step)} of the loop's descriptors that
        block reads load (no 2D block IO) and that move by loop-invariant steps each iteration."""
        body = op.regions[0].block
        inner = {id(r) for o in body.ops for x in o.walk() for r in x.results}
        yield_op = body.ops[-1] if body.ops else None
        if yield_op is None or yield_op.name != "scf.yield":
            return {}
        out = {}
        for i, (arg, init) in enumerate(zip(body.args[1:], op.operands[3:])):
            td = self.env[id(init)]
            y = yield_op.operands[i]
            upd = getattr(y, "op", None)
            if not isinstance(td, TD) or td.type.scattered or upd is None or \
                    upd.name != "xegpu.update_nd_offset" or upd.operands[0] is not arg:
                continue
            if any(id(v) in inner or getattr(v, "block", None) is body for v in upd.operands[1:]):
                continue
            if any(u.name == "xegpu.load_nd" and self.block_read_kind(td.type, load_mode(u))
                   for u, _ in arg.uses):
                out[i] = (td, self.env[id(upd.operands[1])], self.env[id(upd.operands[2])])
        return out

    def _versioned_on_block_reads(self, op: Operation, reads: dict) -> list:
        """The loop twice behind one test made before it (``loop_reads_ok``): a version whose
        loads of ``reads``' descriptors are block reads only, and a cold one that gathers them."""
        b = self.b
        lb, ub, step = (self.env[id(v)] for v in op.operands[:3])
        plan = self.transposed_plan(op, reads)
        sp = self.slm_plan(op, reads, plan)
        if plan is not None and plan.pairs and (sp is not None or not self._parity_inits_ok(op, plan)):
            plan.pairs = []      # B staged in SLM is packed there
        # the fast version counts in i32 (dg2 has no 64-bit integer ALU: an i64 counter cost six
        # instructions a k-step, fp16 256x128x16/64sg): its span must fit
        counted32 = isinstance(step, ir.Constant) and 0 < step.constant < 2**16
        # decode with column-major B: A's panel staged in SLM by the workgroup (decode_slm.py)
        dp = self.decode_a_plan(op, reads, plan) if counted32 else None
        # A staged: the same test in every subgroup of the workgroup (its barriers)
        ok = self.decode_reads_ok(dp, reads, lb, ub, step) if dp is not None else None
        if ok is None:
            dp = None
        self.corner_stores |= dp is not None and len(dp.parts) > 1
        if plan is not None and plan.pairs and not self.parity_kept(
                self._b_loads(plan, op.regions[0].block.args), plan.a_rows, dp is not None and dp.spread):
            plan.pairs = []      # by column parity only with the A^T spread staged (parity_mode)
        for td, dr, dc in reads.values() if dp is None else ():
            # B staged in SLM: the workgroup's panels, one version for all its subgroups (barriers)
            c = self.panel_reads_ok(td, lb, ub, step, dr, dc) if sp else self.loop_reads_ok(td, lb, ub, step, dr, dc)
            ok = c if ok is None else b.and_(ok, c)
        if counted32:
            ok = b.and_(ok, b.icmp_signed("<=", b.sub(ub, lb), I64(2**31 - 2**16)))
            if sp is not None:
                ok = b.and_(ok, self.slm_span_ok(sp, reads, lb, ub))
        # float B by column parity: a subgroup whose accumulators left the loop with a NaN runs
        # it again by the cold version, which is exact (an Inf / NaN of B reached its partner
        # columns: parity_dpas.any_nan)
        checked = bool(plan and plan.pairs) and self.parity_checked(
            self._b_loads(plan, op.regions[0].block.args), plan.a_rows)

        # the cold version by column parity too, the spread on registers, float B's rows masked to
        # the parity's fields (parity_mode "registers", "registers-masked")
        cold_parity = bool(plan and plan.pairs) and self.parity_kept(
            self._b_loads(plan, op.regions[0].block.args), plan.a_rows, True, cold=True)
        if plan is not None and plan.pairs:
            rf = self.target.registers
            acc = sum(math.prod(op.operands[3 + p].type.shape) * op.operands[3 + p].type.dtype.bitwidth // 8
                      for p in plan.acc_positions) // rf.bytes_each
            v = ways(self._b_loads(plan, op.regions[0].block.args)[0].operands[0].type.dtype.bitwidth)
            plan.spreads_kept = spreads_kept(acc, v, plan.k_blocks, rf.count - rf.reserved)

        def version(fast: bool) -> list:
            counted = Counter(self.instructions)
            # column parity where the A^T spread is staged (the fast version, whose dplan it
            # is) or made on registers (the cold one: parity_mode); else B^T packed
            vplan = plan if fast or plan is None or not plan.pairs or cold_parity else replace(plan, pairs=[])
            # both versions take the DPAS in K-block order when B is staged (the cold
            # one's per-subgroup packing spilled 1.2-6.5 KB in chain order, BK=64)
            self.kb_order = (True, 1) if sp is not None or bool(vplan and vplan.pairs) else None
            if dp is not None and len(dp.parts) > 1:
                # decode, A staged from several descriptors (a k-step of 4+ K-blocks): K-block
                # order by a descriptor's K-blocks (in chain order within them: a DPAS right after
                # its accumulator's last needs no wait), the fast version's loads where they are
                # (B's lane rows read ahead in the order lowered, A's SLM loads at their first
                # DPAS). fp16 8x512x64/8sg, acm-g10: chain order 499 instructions for 64 DPAS,
                # 14 KB of spill; K-block order by single K-blocks 389 (a wait on the accumulator
                # before every DPAS), loads moved to their DPAS 409 (B read at its DPAS); 363, 0 spill
                self.kb_order = (not fast, dp.row_words // 8 // len(dp.parts))
            # 8-bit decode's cold version over several K-blocks (bytes read one by one where the
            # columns leave the view, next to 64 accumulator registers): K-block order by single K-blocks, A
            # gathered at its DPAS, B's lane rows read at theirs (int8 8x512x64/8sg 2112 B of
            # spill -> 0, 8x512x128/8sg 2112 -> 0; acm-g10)
            self.cold_bytes = not fast and dp is not None and reads[dp.pos][0].type.dtype.bitwidth == 8 \
                and dp.row_words > 8      # (one K-block a k-step, 8x512x32/8sg: 0 spill, 288 B with these)
            if self.cold_bytes and self.kb_order:
                self.kb_order = (True, 1)
            if fast and sp is not None and counted32:
                self._slm_reads = reads
                self.slm_begin(sp, reads[sp.b_pos][0])
                self.splan = sp
                self.loop_hook = self.slm_loop_hook(sp, step.constant, op.regions[0].block.args[1 + sp.b_pos])
            if fast and dp is not None:
                self.dplan = dp
                self.loop_hook = self.decode_a_hook(dp, step.constant, self.env[id(op.operands[3 + dp.pos])])
            # both versions leave the accumulators as C^T, transposed back once after
            # they meet (transposes on the fast version's way out made IGC spill 864 B,
            # fp16 16x16 tiles)
            steps = {} if fast and counted32 else None
            res = self._lower_for_transposed(op, reads, vplan, fast, steps) if plan else \
                self._lower_for(op, steps, reads_in_bounds={i: fast for i in reads})
            self.splan = self.dplan = None
            self.kb_order = None
            self.cold_bytes = False
            if not fast:     # the report counts the block-read version's instructions
                self.instructions = counted
            return res

        versions = []
        if checked:
            # one cold copy, taken by the subgroups out of bounds and by those whose fast loop
            # left a NaN (both from the initial accumulators): with a copy for each, fp16
            # 8x512x32/8sg spilled 4224 B, with one 1088
            with b.if_else(ok) as (then, otherwise):
                with then:
                    res = version(True)
                    bad = any_nan(b, [res[q] for g in plan.pairs for q in g], self.lane_here())
                    versions.append((res, b.block))
                with otherwise:
                    versions.append(([self._rebuild(r, [ir.Constant(v.type, ir.Undefined) for v in self._flat(r)])
                                      for r in res], b.block))
            need = b.phi(I1)
            need.add_incoming(bad, versions[0][1])
            need.add_incoming(ir.Constant(I1, 1), versions[1][1])
            kept = (self._join_versions(versions), b.block)
            with b.if_then(need):
                again = (version(False), b.block)
            versions = [again, kept]
        else:
            with b.if_else(ok) as (then, otherwise):
                for ctx, fast in ((then, True), (otherwise, False)):
                    with ctx:
                        versions.append((version(fast), b.block))
        self.instructions["k-loop versioned on block reads in bounds"] += 1
        results = self._join_versions(versions)
        for p in plan.acc_positions if plan else ():
            results[p] = self.transpose8(results[p])
        return results

    def _lower_for_transposed(self, op: Operation, reads: dict, plan, in_bounds: bool,
                              steps: Optional[dict] = None) -> list:
        """A version of the k-loop computing C^T = B^T A^T (transposed_dpas.py; ``in_bounds``: the
        fast one, else bounds-checked loads): the accumulators are transposed on the way in and
        left as C^T (``_versioned_on_block_reads`` turns them back where the versions meet)."""
        inits = [op.operands[3 + p] for p in plan.acc_positions]
        saved = {id(v): self.env[id(v)] for v in inits}
        for v in inits:
            self.env[id(v)] = self.transpose8(saved[id(v)])
        for group in plan.pairs:       # column-parity accumulators (parity_dpas.py)
            vs = [op.operands[3 + q] for q in group]
            # (one splat for the whole group is its own split)
            if not (all(_is_splat(self.env[id(x)]) for x in vs) and len({str(self.env[id(x)]) for x in vs}) == 1):
                for x, e in zip(vs, parity_split(self.b, [self.env[id(x)] for x in vs])):
                    self.env[id(x)] = e
        self.tplan, self.parity_pending = plan, {}
        try:
            results = self._lower_for(op, steps, reads_in_bounds={i: in_bounds for i in reads})
        finally:
            self.tplan = None
            self.env.update(saved)
        if self.parity_pending:
            raise CompilerError("a column-parity DPAS without the rest of its group")
        for group in plan.pairs:
            for q, x in zip(group, parity_join(self.b, [results[q] for q in group])):
                results[q] = x
        if in_bounds:
            self.instructions["k-loop computing C^T = B^T A^T (per-lane row loads)"] += 1
        return results

    def _parity_inits_ok(self, op: Operation, plan) -> bool:
        """The column-parity accumulators start from values of their own, or splat constants
        (their own split, shared or not): each init is split in place, once."""
        seen: set = set()
        for p in (p for pair in plan.pairs for p in pair):
            v = op.operands[3 + p]
            if not _is_splat(self.env[id(v)]):
                if id(v) in seen:
                    return False
                seen.add(id(v))
        return True

    def loads_through_spirv_builtin(self, arg: Value) -> bool:
        """Some 2D block load of descriptor ``arg`` takes the Khronos builtin, whose payload IGC
        makes and shares among the loads of one surface (the address-payload ones have their
        own per descriptor already: ``payload``)."""
        for u, _ in arg.uses:
            if u.name == "xegpu.load_nd":
                bits, bw, bh, cnt = xg.block_params(u)
                var = emu.BlockVariant(xg.block_op_kind(u), self.sg, bits, bw, bh, cnt)
                if bp.problem(self.target, var) is not None:
                    return True
        return False

    def counter_position(self, init, body, j: int, ctr: ir.Value, step: ir.Value) -> Optional[tuple]:
        """(row, col) of descriptor iter_arg ``j`` at counter ``ctr`` (i32, from 0 by the step)
        when the loop moves it by constant multiples of the step, else None."""
        y = body.ops[-1].operands[j] if body.ops and body.ops[-1].name == "scf.yield" else None
        upd = getattr(y, "op", None)
        if not isinstance(init, TD) or upd is None or upd.name != "xegpu.update_nd_offset":
            return None
        ds = [self.env.get(id(v)) for v in upd.operands[1:3]]
        if not all(isinstance(d, ir.Constant) for d in ds) or not isinstance(step, ir.Constant) or \
                any(d.constant % step.constant for d in ds):
            return None
        b, c64 = self.b, self.b.zext(ctr, I64)
        return tuple(x if d.constant == 0 else b.add(x, c64 if d.constant == step.constant else
                                                      b.mul(c64, I64(d.constant // step.constant)))
                     for x, d in zip((init.row, init.col), ds))

    def transposed_unit_shift(self, op: Operation) -> int:
        """log2 of the elements per 32-bit unit of the transposed 2D block loads in the body of
        the loop ``op`` (8-bit: 2, 16-bit: 1), 0 when it has none; the largest when mixed."""
        n = 0
        for o in op.regions[0].block.ops:
            if o.name == "xegpu.load_nd" and o.attributes.get("transpose") is not None and \
                    o.attributes.get("transpose_bit_width") == 32:
                bits = o.operands[0].type.dtype.bitwidth
                if bits < 32:
                    n = max(n, (32 // bits).bit_length() - 1)
        return n

    def _lower_for(self, op: Operation, steps: dict[int, tuple[int, int]] | None = None,
                   reads_in_bounds: Optional[dict] = None) -> list:
        """The loop in LLVM IR (LLVM rotates it: the guard before, the test at the bottom).

        ``steps`` (the fast version of a versioned loop with a constant step, whose span the
        versioning checked: ``block_coords.loop_steps``): the loop counts in i32 from 0 (the
        64-bit induction variable is ``lb + counter``, gone when unused), and the 2D block
        coordinates of the descriptors it moves by multiples of its step are computed from the
        counter -- no carried coordinates to move, one add where each block message takes them.
        With transposed loads of 32-bit units of narrower data in the body it counts in those
        units (``transposed_unit_shift``).

        ``reads_in_bounds`` (targets without 2D block IO, ``_versioned_on_block_reads``): {iter_arg
        position: whether this version's block reads of that descriptor are all in bounds}."""
        b = self.b
        hook, self.loop_hook = self.loop_hook, None     # this loop's, not an inner one's
        lb, ub, step = (self.env[id(v)] for v in op.operands[:3])
        inits = [self.env[id(v)] for v in op.operands[3:]]
        moving = {j: mv for j, mv in (steps or {}).items() if isinstance(inits[j], TD) and inits[j].xy is not None}

        def flat_of(j: int, x) -> list:
            return [x.row, x.col] if j in moving else self._flat(x)

        flat = [v for j, x in enumerate(inits) for v in flat_of(j, x)]
        pre = b.block
        header = self.kernel.append_basic_block("for.header")
        body_bb = self.kernel.append_basic_block("for.body")
        exit_bb = self.kernel.append_basic_block("for.exit")
        if steps is not None:
            span = b.sub(ub, lb)
            n32 = b.trunc(b.select(b.icmp_signed(">", span, I64(0)), span, I64(0)), I32)
        # A fast loop whose transposed loads take 32-bit units of narrower elements (column-major
        # 8- / 16-bit B) counts in those units: their x is one add of the counter to a
        # loop-invariant, the element counter a shift of it. Counting elements, x was
        # (x0 + counter) >> n per K-slice, an or and a shift in IGC's code for each: int8
        # 256x128x128/32sg bmg 68 -> 65 instructions for 32 DPAS, fp16 126 (2.05 -> 1.97).
        unit_shift = self.transposed_unit_shift(op) if steps is not None and self.target.block_io else 0
        if unit_shift and step.constant % (1 << unit_shift):
            unit_shift = 0
        if unit_shift:
            n_units = b.lshr(b.add(n32, I32((1 << unit_shift) - 1)), I32(unit_shift))
        b.branch(header)
        b.position_at_end(header)
        ctr_u = b.phi(I32 if steps is not None else I64, name="iv")
        ctr_u.add_incoming(I32(0) if steps is not None else lb, pre)
        phis = []
        for v in flat:
            p = b.phi(v.type)
            p.add_incoming(v, pre)
            phis.append(p)
        ctr = b.shl(ctr_u, I32(unit_shift)) if unit_shift else ctr_u
        if steps is not None:
            iv = b.add(lb, b.zext(ctr, I64))
            cond = b.icmp_signed("<", ctr_u, n_units) if unit_shift else b.icmp_signed("<", ctr, n32)
        else:
            iv, cond = ctr, b.icmp_signed("<", ctr, ub)

        def units(n: int) -> ir.Value | None:
            """The counter in units of 2**n elements (exact), or None."""
            if not unit_shift or n > unit_shift:
                return None
            return ctr_u if n == unit_shift else b.shl(ctr_u, I32(unit_shift - n))

        moved_at: dict[tuple, ir.Value] = {}

        def at_counter(v0s, mr, mc, split_ok=False):
            out = []
            for v0, m in zip(v0s, (mc, mr)):
                if m == 0:
                    out.append(v0)
                    continue
                # with immediate offsets, descriptors a constant apart (a k-step's K-slices of
                # column-major B) keep that constant outermost: one payload coordinate a k-step
                # and immediate offsets, not one (x0 + d) + counter per load (tf32 colB, bmg
                # 138 -> 110 instructions for 64 DPAS). Loops counting in units of narrower
                # data (unit_shift) have their own split in block_xy: this one added a move there
                split = split_ok and self.target.block_io.immediate_offsets and not unit_shift
                base, d = bc.split_small_add(v0) if split else (v0, 0)
                key = (id(base), m)
                if key not in moved_at:
                    moved_at[key] = b.add(base, ctr if m == 1 else b.mul(ctr, I32(m)))
                out.append(b.add(moved_at[key], I32(d)) if d else moved_at[key])
            return tuple(out)

        def rebuild(j: int, like, vals: list):
            """(the loop's value of carried ``like``, the body's): a moving descriptor takes a
            surface of its own in the body (``block_coords.own_surface``: no IGC payload shared
            with the others, so no payload copies), its plain surface outside."""
            if j not in moving:
                v = self._rebuild(like, vals)
                return v, v
            (mr, mc), (x0, y0) = moving[j], like.xy
            # prefetch descriptors keep their own invariant (sharing the loads' x added a move:
            # lnl 128x128x32/16sg bf16 30 -> 31)
            loads = any(u.name == "xegpu.load_nd" for u, _ in op.regions[0].block.args[1 + j].uses)
            out = like.moved(vals[0], vals[1], at_counter((x0, y0), mr, mc, loads))
            inner = like.moved(vals[0], vals[1], out.xy)
            if like.shift is None and not self.target.block_io.immediate_offsets and \
                    self.loads_through_spirv_builtin(op.regions[0].block.args[1 + j]):
                at = ir.IRBuilder(pre)
                at.position_before(pre.terminator)
                surf, x0, y0, shift = bc.own_surface(at, like.surf, x0, y0, (mr, mc), like.type.dtype.bitwidth // 8,
                                                     self.target.block_io.min_width_bytes)
                inner = like.moved(vals[0], vals[1], at_counter((x0, y0), mr, mc))
                inner.surf, inner.shift = surf, shift
            inner.counter = (x0, y0, mr * step.constant, mc * step.constant)
            inner.counted = (mc, units)
            self._invariant.update({id(v0): pre for v0, m in ((x0, mc), (y0, mr)) if m == 0})
            return out, inner

        pos = 0
        carried, in_body = [], []
        for j, like in enumerate(inits):
            k = len(flat_of(j, like))
            out, inner = rebuild(j, like, phis[pos:pos + k])
            carried.append(out)
            in_body.append(inner)
            pos += k
        b.cbranch(cond, body_bb, exit_bb)
        b.position_at_end(body_bb)
        body = op.regions[0].block

        def lower_body(ctr_v: ir.Value, iv_v: ir.Value, vals: list, parity: Optional[int]) -> list:
            """One copy of the body at counter ``ctr_v``; the flat values it yields."""
            self.env[id(body.args[0])] = iv_v
            for j, (arg, val) in enumerate(zip(body.args[1:], vals)):
                if reads_in_bounds and j in reads_in_bounds:
                    # the body's copy carries the versioning's verdict; the loop's results do not.
                    # With B staged (counted in i32), its position is the entry's plus the counter's
                    # multiple: no 64-bit add a step (dg2 has no 64-bit ALU: 4 instructions a
                    # descriptor). Not elsewhere: Intel's compiler then ended the unstaged loops
                    # with a divergent backward goto instead of jmpi (decode, 32x16 tiles)
                    at = self.counter_position(inits[j], body, j, ctr_v, step) \
                        if steps is not None and (self.splan or self.dplan) is not None else None
                    val = val.moved(*(at or (val.row, val.col)), val.xy)
                    val.reads_in_bounds = reads_in_bounds[j]
                self.env[id(arg)] = val
            leave = hook(ctr_v, n32, parity) if hook is not None else None
            self._preheaders.append(pre)
            ys = self.block(body)
            self._preheaders.pop()
            if leave is not None:
                leave()
            return [v for j, y in enumerate(ys) for v in flat_of(j, y)]

        def rebuilt(vals: list) -> list:
            out, pos = [], 0
            for like in inits:
                k = len(self._flat(like))
                out.append(self._rebuild(like, vals[pos:pos + k]))
                pos += k
            return out

        # a hook that asks for it (B staged in two SLM buffers) gets the body twice an iteration,
        # each copy reading a buffer of its own: its SLM addresses are loop-invariant
        pairs = hook is not None and getattr(hook, "pairs", False) and steps is not None and not moving \
            and not unit_shift
        yflat = lower_body(ctr, iv, in_body, 0 if pairs else None)
        advance = step.constant >> unit_shift if steps is not None else None
        if pairs:
            mid, first = b.block, yflat
            ctr2 = b.add(ctr_u, I32(advance))
            second_bb = self.kernel.append_basic_block("for.body2")
            b.cbranch(b.icmp_signed("<", ctr2, n32), second_bb, exit_bb)
            b.position_at_end(second_bb)
            yflat = lower_body(ctr2, b.add(lb, b.zext(ctr2, I64)), rebuilt(first), 1)
            advance *= 2
        latch = b.block
        ctr_u.add_incoming(b.add(ctr_u, I32(advance)) if steps is not None else b.add(ctr_u, step), latch)
        for p, y in zip(phis, yflat):
            p.add_incoming(y, latch)
        b.branch(header)
        b.position_at_end(exit_bb)
        if pairs:
            carried = rebuilt(join_phis(b, phis, header, first, mid))
        return carried


for _c in ("arith_extf", "arith_truncf", "arith_sitofp", "arith_uitofp", "arith_fptosi",
           "arith_fptoui", "arith_extsi", "arith_extui", "arith_trunci", "arith_index_cast"):
    setattr(XeGPULowering, "op_" + _c, XeGPULowering._cast)
del _c


# ----------------------------------------------------------------------------------------------
# The hook
# ----------------------------------------------------------------------------------------------


def to_xegpu(sg_fn: Function, target: Target | str, *,
             report: Optional[blocking.BlockingReport] = None) -> Function:
    """Run the XeGPU passes (blocking, lane distribution) and verify the result. (Software
    pipelining runs before, on workgroup-level XeTile: ``passes.pipelining``.)"""
    tgt = get_target(target) if isinstance(target, str) else target
    xfn = blocking.run(sg_fn, tgt, report)
    xfn = lane_distribution.run(xfn, tgt)
    try:
        verify_function(xfn)
        xg.verify_for_target(xfn, tgt, check_block_shape)
    except Exception as e:
        raise CompilerError(f"internal error: the XeGPU IR does not verify for {tgt.name}: {e}") from e
    return xfn


def lower(sg_fn: Function, target: Target | str, ctx: Optional[dict] = None) -> dict:
    """The XeGPU path of ``compile_kernel``: xetile-sg -> XeGPU -> LLVM IR.

    ``ctx`` keys (all optional): ``emulate`` (CPU emulation of DPAS / 2D block IO),
    ``num_subgroups``,
    ``version_loops`` (version k-loops on the 2D block surface checks; default: not when emulating),
    ``debug`` (XEJIT_DEBUG=1: report out-of-range gathers/scatters, codegen/bounds_debug.py),
    ``span_checks`` (False drops the span check of gathers/scatters: benchmarks only).
    Returns ``{"xegpu": text, "xegpu_fn": Function, "module": llvmlite module, "extensions",
    "signature", "arg_plan", "instructions": Counter, "fallbacks": [str], "report": dict, "debug_sites"}``.
    """
    ctx = dict(ctx or {})
    tgt = get_target(target) if isinstance(target, str) else target
    if tgt.dpas is None:
        raise CompilerError(f"target {tgt.name!r} has no DPAS; use the generic lowering")
    emulate = bool(ctx.get("emulate", False))
    nsg = ctx.get("num_subgroups") or sg_fn.attributes.get("num_subgroups") or 1
    rep = blocking.BlockingReport()
    xfn = to_xegpu(sg_fn, tgt, report=rep)
    lw = XeGPULowering(xfn, tgt, emulate, nsg, ctx.get("version_loops"))
    if ctx.get("debug"):
        lw.debug_sites = []
    lw.span_checks = ctx.get("span_checks", True)
    module = lw.run()
    fallbacks = [f"{e['loc']}: {e['op']}: {e['instruction']}"
                 f"{' instead of 2D block IO' if e['op'] != 'xetile.tile_mma' else ''}: {e['reason']}"
                 for e in rep.fallbacks] + lw.fallbacks
    if tgt.block_io is None:
        fallbacks.append(f"target {tgt.name} has no 2D block IO: loads use subgroup block reads of "
                         f"whole rows when a block is in bounds and 4-byte aligned (per-lane loads "
                         f"otherwise), stores are per-lane with bounds checks")
    ext = get_target("generic").spirv_extensions if emulate else tgt.spirv_extensions
    return {"xegpu": print_function(xfn), "xegpu_fn": xfn, "module": module, "extensions": ext,
            "signature": lw.signature, "arg_plan": lw.arg_plan, "instructions": lw.instructions,
            "fallbacks": fallbacks, "report": rep.as_dict(), "debug_sites": lw.debug_sites}


__all__ = ["lower", "to_xegpu", "XeGPULowering", "kernel_abi", "written_arrays", "reg_type"]
