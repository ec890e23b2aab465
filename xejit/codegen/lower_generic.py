"""Generic lowering: subgroup-level XeTile IR (``xetile-sg``) -> LLVM IR (llvmlite) for any SPIR-V
device with ``cl_intel_subgroups`` (target without DPAS / 2D block IO).

Register model (docs/compiler.md): a subgroup tile [R, C] is held per lane with lane layout
[1, S] (S = the target's subgroup size): lane l owns columns ``g*S + l`` for ``g < ceil(C/S)``;
when C < S lane l holds column ``l mod C`` (replicated; only lanes l < C write it). Floats of
every width are held as f32 (bf16/f16 results rounded after each op, like the interpreter).
Every op or case without a rule raises :class:`CompilerError` naming the op and its line.
"""
from __future__ import annotations

import os

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from llvmlite import ir

from ..ir.core import (ArrayType, Function, Operation, ScalarType, TileType,
                       VectorType, bf16, f16, f32, round_to_bf16)
from . import bounds_debug
from . import builtins as bi
from .abi import ADDRESS_KINDS, POINTER_KINDS, kernel_abi
from .lowering_base import (LoweringBase, array_span, counted_loop, float_to_int, floor_divide, in_span,
                            int_to_bool, join_phis, reg_type, safe_int_division, wrap_signed)
from .passes.common import WRITES, CompilerError, written_arrays

#: load GEMM A operands as uniform scalars (broadcast by the FMA) instead of shuffling them
UNIFORM_A = True
#: fuse loads whose only users are tile_mma operands into the FMA loop (k-slice by k-slice)
FUSE_MMA_LOADS = True


#: parts of CL_CONFIG_CPU_TARGET_ARCH values (LLVM CPU names) that name AVX-512 CPUs
_AVX512_ARCHS = ("skx", "skylake-avx512", "avx512", "cascadelake", "cooperlake", "cannonlake", "icelake",
                 "tigerlake", "sapphirerapids", "emeraldrapids", "graniterapids", "znver4", "znver5")


def cpu_vector_registers() -> tuple[int, int]:
    """(count, bytes) of the CPU device's vector registers: the OpenCL CPU runtime compiles for
    AVX-512 where the CPU has it (32 zmm of 64 bytes: its assembly on a Zen 4 VM,
    CL_CONFIG_DUMP_ASM), else for AVX2 (16 ymm of 32 bytes; an AVX2-only VM: ``skx`` code dies
    with SIGILL). ``CL_CONFIG_CPU_TARGET_ARCH``, which makes the runtime compile for the named
    CPU, decides where it is set (AVX-512 for the names of AVX-512 CPUs, else AVX2's register
    file); otherwise /proc/cpuinfo's flags, and AVX2 where they cannot be read."""
    arch = os.environ.get("CL_CONFIG_CPU_TARGET_ARCH", "").strip().lower()
    if arch:
        return (32, 64) if any(n in arch for n in _AVX512_ARCHS) else (16, 32)
    return (32, 64) if "avx512f" in cpu_flags() else (16, 32)


def cpu_flags() -> frozenset[str]:
    """The host CPU's feature flags (/proc/cpuinfo; empty where it cannot be read)."""
    try:
        with open("/proc/cpuinfo") as f:
            return frozenset(next((line for line in f if line.startswith("flags")), "").split())
    except OSError:
        return frozenset()


#: the CPU device's vector registers (:func:`cpu_vector_registers`); GEMM register strips are
#: sized to fit them, and the packed GEMM's microkernel is chosen by them (kernels/gemm.py)
VECTOR_REGS, VECTOR_BYTES = cpu_vector_registers()
#: GEMM boundary path (a tile not fully in bounds): a real loop over k with masked loads
#: (small code: the driver build time does not grow with BK) instead of an unrolled copy
LOOP_BOUNDARY_MMA = True
#: In-bounds tile_mma versions with more FMAs than this (BM*BK*BN/16) loop over k per register strip
#: instead of unrolling it (CPU driver build, fp32 row-major B: 16x32x32 (1024) 5 s, 32x32x32 (2048)
#: 67 s unrolled; the autotuner's generic configs are at most 256 and stay unrolled)
MAX_UNROLLED_FMAS = 512
#: The same for a tile_mma whose A is computed in registers (one column group, read with a
#: subgroup shuffle per k; attention's P @ V): above it the k steps are a loop with the shuffle
#: lane the loop counter (fp32 attention forward 8x16: 11 s CPU to build unrolled)
MAX_UNROLLED_SHUFFLED_FMAS = 128
#: The largest tile_mma accumulator per subgroup, in lane values (BM * ceil(BN/16)), checked up
#: front: fp32 64x64x32 (256) builds in 12 s on the CPU device; 128x64x32 produced 2.1 MB of
#: SPIR-V in 24 s before the driver's build (and with k loops per strip crashes LLVM's NewGVN)
MAX_ACC_VALUES = 256

F32, F16, I1, I8, I16, I32, I64 = bi.F32, bi.F16, ir.IntType(1), bi.I8, bi.I16, bi.I32, bi.I64


# ----------------------------------------------------------------------------------------------
# values during lowering
# ----------------------------------------------------------------------------------------------

@dataclass
class Vec:
    """A subgroup vector: ``regs[r][g]`` is this lane's element of row r, column group g."""
    shape: tuple[int, int]
    dtype: ScalarType
    regs: list[list[ir.Value]]
    uniform: bool = False  # regs[r][c] holds element (r, c), the same in every lane
    #: a uniform load whose memory no op writes before its last use: tile_mma may read it again
    #: k-slice by k-slice (in a k loop) instead of keeping the whole tile live
    source: "LazyTile | None" = None

    def flat(self) -> list[ir.Value]:
        return [x for row in self.regs for x in row]

    def rebuild(self, vals: list[ir.Value]) -> "Vec":
        cg = len(self.regs[0])
        return Vec(self.shape, self.dtype, [vals[i * cg:(i + 1) * cg] for i in range(len(self.regs))],
                   self.uniform)


@dataclass
class LazyTile:
    """A load_tile whose only users are tile_mma operands in the same block: the FMA loop loads
    each k-slice right before using it (short live ranges instead of the whole tile in registers)."""
    tile: "Tile"
    pad: ir.Value
    inb: ir.Value
    shape: tuple[int, int]
    dtype: ScalarType


@dataclass
class LazyAcc:
    """A load_tile of a tile_mma accumulator that is stored back to the same tile right after
    (``store_tile(t, tile_mma(a, b, load_tile(t)))``, the GEMV's partial sums): tile_mma reads,
    updates and writes it register strip by register strip inside its own in-bounds test, so no
    accumulator is live across a branch join (the CPU driver spilled all of them there)."""
    tile: "Tile"
    pad: ir.Value


#: what a tile_mma that stored its accumulator in place returns: its store_tile has nothing to do
STORED_IN_PLACE = object()


@dataclass
class Arr:
    ptr: ir.Value
    dims: list[ir.Value]      # 2D view: H, W (i64)
    strides: list[ir.Value]   # 2D view: s0, s1 (i64, elements)
    type: ArrayType


@dataclass
class Tile:
    arr: Arr
    r0: ir.Value
    c0: ir.Value
    type: TileType
    offsets: Vec | None = None  # scatter tiles

    def flat(self) -> list[ir.Value]:
        return [self.r0, self.c0] + (self.offsets.flat() if self.offsets is not None else [])

    def rebuild(self, vals):
        return Tile(self.arr, vals[0], vals[1], self.type,
                    self.offsets.rebuild(vals[2:]) if self.offsets is not None else None)


def mem_type(t: ScalarType) -> ir.Type:
    """LLVM type of an element of ``t`` in memory (bf16 as 16-bit words)."""
    if t == f32:
        return F32
    if t == f16:
        return F16
    if t == bf16:
        return I16
    return {1: I8, 8: I8, 16: I16, 32: I32, 64: I64}[t.bitwidth]




@dataclass
class LoweringReport:
    instructions: Counter = field(default_factory=Counter)
    fallbacks: list[str] = field(default_factory=list)
    regs_bytes_per_lane: int = 0


class GenericLowering(LoweringBase):
    """Lowers one subgroup-level function; ``module`` is the llvmlite module after :meth:`run`."""

    def __init__(self, fn: Function, target, num_subgroups: int, debug: bool = False,
                 span_checks: bool = True, addresses: bool = False):
        if fn.attributes.get("level") != "subgroup":
            raise CompilerError(f"generic lowering needs subgroup-level IR (level='subgroup'), got "
                                f"{fn.attributes.get('level')!r}")
        self.fn = fn
        self.target = target
        self.S = target.subgroup_size
        self.nsg = num_subgroups
        self.module = bi.new_module(fn.name)
        self.report = LoweringReport()
        self.env: dict[int, Any] = {}
        self.written: set[int] = set()
        self._mark_written()
        self.arg_kinds, self.arg_plan = kernel_abi(fn, self.written, addresses)
        # XEJIT_DEBUG=1: a hidden report buffer, the last argument (codegen/bounds_debug.py)
        self.debug_sites: list[dict] | None = [] if debug else None
        self._span_checks = span_checks   # False only for benchmarks/bench_gather_bounds.py
        if debug:
            self.arg_kinds = self.arg_kinds + ["ptr"]
            self.arg_plan = self.arg_plan + [bounds_debug.PLAN_STEP]
        params = [bi.GLOBAL if k in POINTER_KINDS else F32 if k == "f32" else I64 for k in self.arg_kinds]
        self.llfn = bi.kernel(self.module, fn.name, params, subgroup_size=self.S)
        self.b = ir.IRBuilder(self.llfn.append_basic_block("entry"))
        b = self.b
        self.lane32 = bi.sub_group_local_id(b)
        self.lane = b.zext(self.lane32, I64, name="lane")
        self._lane_cols: dict[int, ir.Value] = {}
        self._bases: dict = {}
        # lowering the in-bounds version of a loop (op_scf_for): its tile_mma skips the bounds test
        self._assume_in_bounds = False
        self._span: dict[int, tuple[ir.Value, ir.Value]] = {}   # id(Arr) -> (lo, count): array_span
        self._arr_name: dict[int, str] = {}                       # id(Arr) -> argument name
        self._zero_src = None
        pi = 0
        for a in fn.args:
            t = a.type
            if isinstance(t, ArrayType):
                ptr = self.llfn.args[pi]
                if self.arg_kinds[pi] in ADDRESS_KINDS:   # an address: the pointer is made here
                    ptr = b.inttoptr(ptr, bi.GLOBAL, name=f"{a.name_hint or 'arg'}_ptr")
                dims = list(self.llfn.args[pi + 1:pi + 1 + t.rank])
                strides = list(self.llfn.args[pi + 1 + t.rank:pi + 1 + 2 * t.rank])
                pi += 1 + 2 * t.rank
                if t.rank == 1:
                    dims2, strides2 = [I64(1), dims[0]], [I64(0), strides[0]]
                elif t.rank == 2:
                    dims2, strides2 = dims, strides
                else:
                    raise CompilerError(f"argument {a.name_hint}: arrays of rank {t.rank} are not supported")
                self.env[id(a)] = Arr(ptr, dims2, strides2, t)
                self._span[id(self.env[id(a)])] = array_span(b, dims, strides)
                self._arr_name[id(self.env[id(a)])] = a.name_hint or "?"
                if self._zero_src is None:
                    self._zero_src = dims[0]
                self.env[("dims", id(a))] = (dims, strides)
            else:
                self.env[id(a)] = self.llfn.args[pi]
                pi += 1

    def _mark_written(self) -> None:
        self.written = written_arrays(self.fn)

    # --- small helpers ------------------------------------------------------------------------
    error_suffix = " (generic target)"

    def count(self, what: str, n: int = 1) -> None:
        self.report.instructions[what] += n

    def lane_col(self, C: int) -> ir.Value:
        """This lane's column within a column group (i64): lane, or lane mod C when C < S."""
        if C >= self.S:
            return self.lane
        v = self._lane_cols.get(C)
        if v is None:
            with self.b.goto_entry_block():
                self.b.position_after(self.lane)
                v = self.lane if C == self.S else self.b.urem(self.lane, I64(C), name=f"lane_mod{C}")
            self._lane_cols[C] = v
        return v

    def col_groups(self, C: int) -> int:
        return max(1, -(-C // self.S))

    def _in_range(self, v: ir.Value, n: ir.Value) -> ir.Value:
        """``0 <= v < n`` (signed: tile offsets may be negative)."""
        b = self.b
        return b.and_(b.icmp_signed(">=", v, I64(0)), b.icmp_signed("<", v, n))

    def col_valid(self, C: int, g: int) -> ir.Value | None:
        """i1: does this lane own a real (and, for C < S, first-copy) column in group g? None = always."""
        if C < self.S:
            return self.b.icmp_unsigned("<", self.lane, I64(C))
        if (g + 1) * self.S <= C:
            return None
        return self.b.icmp_unsigned("<", self.lane, I64(C - g * self.S))

    def col_index(self, C: int, g: int) -> ir.Value:
        lc = self.lane_col(C)
        return lc if g == 0 else self.b.add(lc, I64(g * self.S))

    def const(self, t: ScalarType, value) -> ir.Constant:
        if t.is_float:
            v = float(value)
            if t == bf16:
                v = float(round_to_bf16(np.array([v], np.float32))[0])
            elif t == f16:
                v = float(np.float16(v))
            return ir.Constant(F32, float(np.float32(v)))
        if t.bitwidth == 1:
            return I1(1 if value else 0)
        return ir.Constant(reg_type(t), wrap_signed(int(value), t.bitwidth))

    def to_mem(self, t: ScalarType, v: ir.Value) -> ir.Value:
        b = self.b
        if t == bf16:
            bits = b.bitcast(self.round_to(bf16, v), I32)
            return b.trunc(b.lshr(bits, I32(16)), I16)
        if t == f16:
            return b.fptrunc(v, F16)
        if t.bitwidth == 1:
            return b.zext(v, I8)
        return v

    def from_mem(self, t: ScalarType, v: ir.Value) -> ir.Value:
        b = self.b
        if t == bf16:
            return b.bitcast(b.shl(b.zext(v, I32), I32(16)), F32)
        if t == f16:
            return b.fpext(v, F32)
        if t.bitwidth == 1:
            return b.icmp_unsigned("!=", v, I8(0))
        return v

    def fma(self, a, b_, c):
        fn = self.module.globals.get("llvm.fma.f32")
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(F32, [F32, F32, F32]), "llvm.fma.f32")
        return self.b.call(fn, [a, b_, c])

    def shuffle(self, v: ir.Value, lane: ir.Value) -> ir.Value:
        """Read ``v`` from lane ``lane`` (i32) of the subgroup; any register type."""
        b, t = self.b, v.type
        self.count("shuffle")
        if t == F32:
            return bi.shuffle(b, v, lane, "f32")
        if t == I32:
            return bi.shuffle(b, v, lane, "i32")
        if t == I64:
            lo = bi.shuffle(b, b.trunc(v, I32), lane, "u32")
            hi = bi.shuffle(b, b.trunc(b.lshr(v, I64(32)), I32), lane, "u32")
            return b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), I64(32)))
        if isinstance(t, ir.IntType):
            return b.trunc(bi.shuffle(b, b.zext(v, I32), lane, "u32"), t)
        raise CompilerError(f"cannot shuffle a value of type {t}")

    def if_then(self, cond: ir.Value):
        return self.b.if_then(cond)

    def elem_ptr(self, arr: Arr, idx: ir.Value) -> ir.Value:
        return self.b.gep(arr.ptr, [idx], source_etype=mem_type(arr.type.dtype))

    # --- driver -------------------------------------------------------------------------------
    def run(self) -> ir.Module:
        self.lower_block(self.fn.entry.ops)
        self.b.ret_void()
        return self.module

    def lower_block(self, ops: list[Operation]) -> list | None:
        for op in ops:
            if op.name in ("func.return",):
                return None
            if op.name == "scf.yield":
                return [self.env[id(v)] for v in op.operands]
            res = self.lower_op(op)
            if res is not None:
                for r, v in zip(op.results, res if isinstance(res, list) else [res]):
                    self.env[id(r)] = v
        return None

    # --- environment ---------------------------------------------------------------------------
    def op_xejit_program_id(self, op):
        return bi.group_id(self.b, op.attributes["axis"])

    def op_xejit_num_programs(self, op):
        return bi.work_item(self.b, "num_groups", op.attributes["axis"])

    def op_gpu_subgroup_id(self, op):
        return self.b.zext(bi.sub_group_id(self.b), I64)

    def op_gpu_num_subgroups(self, op):
        return I64(self.nsg)

    def op_xejit_dim(self, op):
        dims, _ = self.env[("dims", id(self._arr_root(op.operands[0])))]
        return dims[op.attributes["dim"]]

    def op_xejit_stride(self, op):
        _, strides = self.env[("dims", id(self._arr_root(op.operands[0])))]
        return strides[op.attributes["dim"]]

    def _arr_root(self, v):
        return v

    def op_xejit_print(self, op):
        return None

    op_xejit_breakpoint = op_xejit_print

    # --- scalars and element-wise ---------------------------------------------------------------
    def op_arith_constant(self, op):
        t = op.result.type
        if isinstance(t, VectorType):
            et = t.dtype
            c = self.const(et, op.attributes["value"])
            R, C = t.shape
            return Vec((R, C), et, [[c] * self.col_groups(C) for _ in range(R)])
        return self.const(t, op.attributes["value"])

    def op_vector_splat(self, op):
        t = op.result.type
        R, C = t.shape
        return Vec((R, C), t.dtype, [[self.env[id(op.operands[0])]] * self.col_groups(C) for _ in range(R)])

    def op_vector_step(self, op):
        t = op.result.type
        R, C = t.shape
        if C == 1:
            return Vec((R, C), t.dtype, [[I64(r)] for r in range(R)])
        return Vec((R, C), t.dtype, [[self.col_index(C, g) for g in range(self.col_groups(C))]])

    def _map(self, op, fn):
        """Apply ``fn(*scalars) -> scalar`` to scalars or element by element to vectors."""
        args = [self.env[id(v)] for v in op.operands]
        vecs = [a for a in args if isinstance(a, Vec)]
        rt = op.result.type
        if not vecs:
            return fn(*args)
        R, C = rt.shape
        regs = []
        for r in range(R):
            row = []
            for g in range(self.col_groups(C)):
                row.append(fn(*[a.regs[r][g] if isinstance(a, Vec) else a for a in args]))
            regs.append(row)
        return Vec((R, C), rt.dtype, regs)

    def op_elementwise(self, op):
        et = op.operands[0].type
        et = et.dtype if isinstance(et, VectorType) else et
        rt = op.result.type.dtype if isinstance(op.result.type, VectorType) else op.result.type
        name = op.name
        b = self.b
        if name in bi.MATH:
            fname, n = bi.MATH[name]
            if not et.is_float:
                raise self.err(op, f"'{name}' on {et}")
            return self._map(op, lambda *xs: self.round_to(rt, self.call(fname, F32, list(xs))))
        if name in bi.BINARY:
            fl, signed, unsigned = bi.BINARY[name]
            if et.is_float:
                f = getattr(b, fl)
                return self._map(op, lambda x, y: self.round_to(rt, f(x, y)))
            sname = signed if et.is_signed else unsigned
            if sname in ("smax", "smin", "umax", "umin"):
                pred = ">" if sname.endswith("max") else "<"
                cmp = b.icmp_signed if sname[0] == "s" else b.icmp_unsigned
                return self._map(op, lambda x, y: b.select(cmp(pred, x, y), x, y))
            if sname == "floordiv":
                return self._map(op, lambda x, y: safe_int_division(b, lambda p, q: floor_divide(b, p, q), x, y, True))
            f = getattr(b, sname)
            if sname in ("sdiv", "udiv", "srem", "urem"):
                return self._map(op, lambda x, y: safe_int_division(b, f, x, y, sname[0] == "s"))
            return self._map(op, lambda x, y: f(x, y))
        if name in bi.UNARY:
            if name == "arith.negf":
                return self._map(op, lambda x: b.fneg(x))
            if name == "math.absi":
                return self._map(op, lambda x: b.select(b.icmp_signed("<", x, ir.Constant(x.type, 0)),
                                                        b.neg(x), x))
        raise self.err(op, f"'{name}' is not supported")

    def op_arith_cmpf(self, op):
        pred = op.attributes["predicate"]
        b = self.b
        if pred == "ne":
            return self._map(op, lambda x, y: b.fcmp_unordered("!=", x, y))
        return self._map(op, lambda x, y: b.fcmp_ordered(bi.COMPARE[pred], x, y))

    def op_arith_cmpi(self, op):
        pred = op.attributes["predicate"]
        et = op.operands[0].type
        et = et.dtype if isinstance(et, VectorType) else et
        cmp = self.b.icmp_signed if et.is_signed else self.b.icmp_unsigned
        return self._map(op, lambda x, y: cmp(bi.COMPARE[pred], x, y))

    def op_arith_select(self, op):
        return self._map(op, lambda c, x, y: self.b.select(c, x, y))

    def _cast(self, op):
        src = op.operands[0].type
        st = src.dtype if isinstance(src, VectorType) else src
        rt = op.result.type.dtype if isinstance(op.result.type, VectorType) else op.result.type
        b = self.b
        name = op.name
        if name in ("arith.extf", "arith.truncf"):
            return lambda x: self.round_to(rt, x)
        if name in ("arith.sitofp", "arith.uitofp"):
            conv = b.sitofp if name == "arith.sitofp" else b.uitofp
            if st.bitwidth == 1:
                conv = b.uitofp
            return lambda x: self.round_to(rt, conv(x, F32))
        if name in ("arith.fptosi", "arith.fptoui"):
            return lambda x: float_to_int(b, x, reg_type(rt), name == "arith.fptosi")
        if name in ("arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast"):
            to = reg_type(rt)

            def icast(x):
                if to.width == 1 and x.type.width > 1:
                    return int_to_bool(b, x)
                if x.type.width == to.width:
                    return x
                if x.type.width > to.width:
                    return b.trunc(x, to)
                signed = name == "arith.extsi" or (name == "arith.index_cast" and st.is_signed and st.bitwidth > 1)
                return b.sext(x, to) if signed else b.zext(x, to)
            return icast
        raise self.err(op, f"cast '{name}' from {st} to {rt} is not supported")

    def op_cast(self, op):
        return self._map(op, self._cast(op))

    # --- memory ---------------------------------------------------------------------------------
    def op_xetile_init_tile(self, op):
        arr = self.env[id(op.operands[0])]
        t = op.result.type
        if t.scatter:
            return Tile(arr, I64(0), I64(0), t, self.env[id(op.operands[1])])
        r0, c0 = (self.env[id(v)] for v in op.operands[1:])
        return Tile(arr, r0, c0, t)

    def op_xetile_update_tile_offset(self, op):
        tile = self.env[id(op.operands[0])]
        d0, d1 = (self.env[id(v)] for v in op.operands[1:])
        return Tile(tile.arr, self.b.add(tile.r0, d0), self.b.add(tile.c0, d1), tile.type, tile.offsets)

    def op_xetile_prefetch_tile(self, op):
        self.count("prefetch (dropped: no prefetch on generic)")
        return None

    def _in_bounds(self, tile: Tile) -> ir.Value:
        b = self.b
        R, C = tile.type.shape
        H, W = tile.arr.dims
        conds = [b.icmp_signed(">=", tile.r0, I64(0)), b.icmp_signed(">=", tile.c0, I64(0)),
                 b.icmp_signed("<=", b.add(tile.r0, I64(R)), H), b.icmp_signed("<=", b.add(tile.c0, I64(C)), W)]
        c = conds[0]
        for x in conds[1:]:
            c = b.and_(c, x)
        return c

    def _block_io_ok(self, tile: Tile) -> str | None:
        """None when the in-bounds fast path can use subgroup block reads/writes, else why not."""
        t = tile.type
        if not self.target.has_block_reads:
            return "the target has no subgroup block reads"
        if t.dtype.bitwidth != 32:
            return f"{t.dtype} elements: block reads move 32-bit words, lane layout needs one element per lane"
        if t.order != (1, 0) or tile.arr.type.order not in ((1, 0), (0,)):
            return "column-major tile: lanes read a strided column (plain loads)"
        if t.shape[1] % self.S:
            return f"tile width {t.shape[1]} is not a multiple of the subgroup size {self.S}"
        return None

    def _narrow_block_read(self, tile: Tile, r, g: int, bump=None) -> ir.Value:
        """Row r, column group g of an in-bounds row-major tile of 16- or 8-bit elements by one
        subgroup block read (the memory type's value). The CPU driver builds per-lane narrow
        loads far slower: it has no 16- or 8-bit masked vector load, so the masked copy of the
        kernel it makes for partial subgroups tests and loads lane by lane (f16 16x32x32 GEMM:
        40 s vs f32 6 s; with block reads 5.7 s; softmax's 8x128 f16 tile 4.1 -> 3.2 s)."""
        b = self.b
        mt = mem_type(tile.type.dtype)
        ptr = self._fast_addr(tile, r, I64(g * self.S))
        if bump is not None:
            ptr = b.gep(ptr, [bump], source_etype=mt)
        self.count(f"block_read_u{tile.type.dtype.bitwidth}")
        if tile.type.dtype.bitwidth == 16:
            w = bi.block_read_u16(b, ptr)
            return b.bitcast(w, mt) if mt != I16 else w
        return bi.block_read_u8(b, ptr)

    def _block_read_narrow_ok(self, tile: Tile) -> bool:
        """The in-bounds rows of a tile of 16-bit floats or 8-bit ints can be read and written with
        16- / 8-bit subgroup block reads / writes (row-major, whole column groups)."""
        t = tile.type
        narrow = (t.dtype.bitwidth == 16 and t.dtype.is_float) or (t.dtype.bitwidth == 8 and t.dtype.kind in ("int", "uint"))
        return (self.target.has_block_reads and narrow and t.order == (1, 0)
                and tile.arr.type.order in ((1, 0), (0,)) and t.shape[1] % self.S == 0)

    def _addr(self, tile: Tile, r: int, col: ir.Value) -> ir.Value:
        b = self.b
        s0, s1 = tile.arr.strides
        row = b.add(tile.r0, I64(r)) if r else tile.r0
        return b.add(b.mul(row, s0), b.mul(b.add(tile.c0, col), s1))

    def _edge_addr(self, tile: Tile, r: int, col: ir.Value) -> ir.Value:
        """The element offset of (r, col) where it matters only for an element inside the array
        (a masked access): the contiguous dimension of a static order needs no stride multiply
        (as in :meth:`_fast_addr`), so the lanes' addresses are consecutive and the CPU driver
        stores a row with one masked vector store instead of lane by lane."""
        b = self.b
        s0, s1 = tile.arr.strides
        row = b.add(tile.r0, I64(r)) if r else tile.r0
        cc = b.add(tile.c0, col)
        order = tile.arr.type.order
        if order == (1, 0):
            return b.add(b.mul(row, s0), cc)
        if order == (0, 1):
            return b.add(row, b.mul(cc, s1))
        return b.add(b.mul(row, s0), b.mul(cc, s1))

    def op_xetile_load_tile(self, op):
        tile: Tile = self.env[id(op.operands[0])]
        t = tile.type
        R, C = t.shape
        et = t.dtype
        pad = self.const(et, op.attributes.get("padding", 0))
        uses = op.result.uses
        if FUSE_MMA_LOADS and self._accumulates_in_place(op):
            self.count("tile_mma accumulator updated in place")
            return LazyAcc(tile, pad)
        if FUSE_MMA_LOADS and self._fusable(op):
            self.count("load fused into tile_mma")
            why = self._block_io_ok(tile)
            if why is not None and any(i == 1 for _, i in uses) and not self._block_read_narrow_ok(tile):
                self.report.fallbacks.append(f"{op.loc}: load_tile {list(t.shape)}x{et} (GEMM B): "
                                             f"plain loads ({why})")
            return LazyTile(tile, pad, self._in_bounds(tile), (R, C), et)
        if UNIFORM_A and uses and all(u.name == "xetile.tile_mma" and i == 0 for u, i in uses):
            return self._load_uniform(tile, pad, rereadable=self._unwritten_until_uses(op))
        return self._load_tile(op, tile, pad)

    def _load_tile(self, op, tile: Tile, pad: ir.Value) -> Vec:
        """A tile's values in registers: block reads or plain loads when in bounds, else masked."""
        t = tile.type
        R, C = t.shape
        G = self.col_groups(C)
        et = t.dtype
        b = self.b
        mt = mem_type(et)
        why = self._block_io_ok(tile)
        narrow = why is not None and self._block_read_narrow_ok(tile)
        if why is not None and not narrow:
            self.report.fallbacks.append(f"{op.loc}: load_tile {list(t.shape)}x{et}: plain loads ({why})")
        inb = self._in_bounds(tile)
        with b.if_else(inb) as (then, otherwise):
            with then:
                fast = []
                blk_fast = b.block
                for r in range(R):
                    for g in range(G):
                        if why is None:
                            base = self._addr(tile, r, I64(g * self.S))
                            ptr = b.gep(tile.arr.ptr, [base], source_etype=mt)
                            w = bi.block_read_u32(b, ptr)
                            self.count("block_read_u32")
                            fast.append(b.bitcast(w, F32) if et == f32 else w)
                        elif narrow:
                            fast.append(self.from_mem(et, self._narrow_block_read(tile, r, g)))
                        else:
                            self.count("load (in-bounds path)")
                            ptr = self._fast_addr(tile, r, self.col_index(C, g))
                            fast.append(self.from_mem(et, b.load(ptr, typ=mt)))
                blk_fast = b.block
            with otherwise:
                slow = []
                H, W = tile.arr.dims
                for r in range(R):
                    row = b.add(tile.r0, I64(r))
                    rok = self._in_range(row, H)
                    for g in range(G):
                        col = b.add(tile.c0, self.col_index(C, g))
                        ok = b.and_(rok, self._in_range(col, W))
                        idx = self._edge_addr(tile, r, self.col_index(C, g))
                        idx = b.select(ok, idx, I64(0))
                        v = self.from_mem(et, b.load(self.elem_ptr(tile.arr, idx), typ=mt))
                        self.count("masked load (boundary path)")
                        slow.append(b.select(ok, v, pad))
                blk_slow = b.block
        vals = join_phis(b, fast, blk_fast, slow, blk_slow)
        return Vec((R, C), et, [vals[r * G:(r + 1) * G] for r in range(R)])

    def _accumulates_in_place(self, op) -> bool:
        """``op`` loads a tile_mma accumulator that is stored back to the same tile right after:
        its one use is the accumulator of a tile_mma (same block) whose one use is a store_tile to
        the same tile, nothing between writes memory, and the tile takes 32-bit block IO."""
        uses = op.result.uses
        if len(uses) != 1 or uses[0][0].name != "xetile.tile_mma" or uses[0][1] != 2:
            return False
        mma = uses[0][0]
        if mma.parent is not op.parent or len(mma.result.uses) != 1:
            return False
        st, i = mma.result.uses[0]
        if st.name != "xetile.store_tile" or i != 0 or st.parent is not op.parent or st.operands[1] is not op.operands[0]:
            return False
        tile: Tile = self.env[id(op.operands[0])]
        if mma.result.type.dtype != tile.type.dtype or self._block_io_ok(tile) is not None:
            return False
        ops = op.parent.ops
        return not any(o.name in WRITES or o.regions for o in ops[ops.index(op) + 1:ops.index(st)])

    def _fusable(self, op) -> bool:
        """All uses are tile_mma A/B operands later in the same block, with no memory write between."""
        uses = op.result.uses
        if not uses or any(u.name != "xetile.tile_mma" or i > 1 or u.parent is not op.parent for u, i in uses):
            return False
        ops = op.parent.ops
        start = ops.index(op)
        last = max(ops.index(u) for u, _ in uses)
        return not any(o.name in ("xetile.store_tile", "xetile.atomic_rmw_tile", "xetile.store_scatter")
                       or o.regions for o in ops[start + 1:last])

    def _unwritten_until_uses(self, op) -> bool:
        """No op writes device memory from ``op`` to its last use (loops between included), so a
        read of the same addresses at a use sees the same values."""
        ops = op.parent.ops
        start = ops.index(op)

        def ancestor(u):   # the op of ``op``'s block that holds u
            while u is not None and u.parent is not op.parent:
                region = u.parent.parent if u.parent is not None else None
                u = region.parent if region is not None else None
            return u
        tops = [ancestor(u) for u, _ in op.result.uses]
        if not tops or any(t is None for t in tops):
            return False
        last = max(ops.index(t) for t in tops)
        return not any(o.name in WRITES for top in ops[start + 1:last + 1] for o in top.walk())

    def _fast_addr(self, tile: Tile, r: int, col: ir.Value) -> ir.Value:
        """Pointer to element (r, col) of an in-bounds tile on the fast path.

        A fully in-bounds tile of a 2D array whose static order makes one dimension contiguous
        (jit.memory_order: stride 1, or extent 1 where only offset 0 is in bounds) needs no
        multiply by that stride: the address is ``base + r*s0 + col`` (row-major) or
        ``base + r + col*s1`` (column-major), with ``base`` computed once per tile."""
        b = self.b
        mt = mem_type(tile.type.dtype)
        key = ("tilebase", id(tile))
        base = self._bases.get(key)
        if base is None:
            s0, s1 = tile.arr.strides
            base = b.gep(tile.arr.ptr, [b.add(b.mul(tile.r0, s0), b.mul(tile.c0, s1))], source_etype=mt)
            self._bases[key] = base
        s0, s1 = tile.arr.strides
        order = tile.arr.type.order
        rv = r if isinstance(r, ir.Value) else I64(r)
        if order == (1, 0):
            off = col if isinstance(r, int) and r == 0 else b.add(b.mul(rv, s0), col)
        elif order == (0, 1):
            off = b.add(rv, b.mul(col, s1)) if not (isinstance(col, ir.Constant) and col.constant == 0) else rv
        else:
            off = b.add(b.mul(rv, s0), b.mul(col, s1))
        return b.gep(base, [off], source_etype=mt)

    def _rows_per_strip(self, G: int) -> int:
        """Accumulator rows per register strip: RB*G lane values plus one B row and one
        broadcast must fit the device's vector registers (VECTOR_REGS of VECTOR_BYTES). Where a
        lane value is one register (AVX-512) the driver keeps a row's broadcast in a register
        of its own (hoisted: each serves G FMAs), so one more per row: 10 rows of two column
        groups (the packed GEMM's assembly: 14 x 32 spilled in its k loop, 8-10 x 32 did not)."""
        per_val = max(1, -(-self.S * 4 // VECTOR_BYTES))  # registers per f32 lane value
        if per_val == 1:
            return max(1, (VECTOR_REGS - G) // (G + 1))
        return max(1, (VECTOR_REGS - 1 - G * per_val) // (G * per_val))

    def _slice_vals(self, A, B, k: int, rows, G: int, fast: bool, bump=None):
        """Column k of a lazy A (M uniform scalars) and row k of a lazy B (G lane values): plain /
        block loads on the fast path (tile known in bounds), masked loads on the boundary path."""
        b = self.b
        todo = []
        if isinstance(A, LazyTile):
            todo += [("A", m) for m in rows]
        if isinstance(B, LazyTile):
            todo += [("B", g) for g in range(G)]
        vals = []
        for which, i in todo:
            lt = A if which == "A" else B
            tile, et = lt.tile, lt.dtype
            mt = mem_type(et)
            r, col = (i, k if isinstance(k, ir.Value) else I64(k)) if which == "A" else (k, None)
            if which == "B":
                C = lt.shape[1]
                if fast and self._block_io_ok(tile) is None:
                    ptr = self._fast_addr(tile, r, I64(i * self.S))
                    if bump is not None:
                        ptr = b.gep(ptr, [bump], source_etype=mt)
                    w = bi.block_read_u32(b, ptr)
                    self.count("block_read_u32")
                    vals.append(b.bitcast(w, F32) if et == f32 else w)
                    continue
                if fast and self._block_read_narrow_ok(tile):
                    vals.append(self.from_mem(et, self._narrow_block_read(tile, r, i, bump)))
                    continue
                col = self.col_index(C, i)
            self.count(("uniform load (A, broadcast)" if which == "A" else "load") +
                       (" (in-bounds path)" if fast else " (boundary path, masked)"))
            if fast:
                ptr = self._fast_addr(tile, r, col)
                if bump is not None and which == "B":
                    ptr = b.gep(ptr, [bump], source_etype=mt)
                vals.append(self.from_mem(et, b.load(ptr, typ=mt)))
                continue
            H, W = tile.arr.dims
            row = b.add(tile.r0, I64(r))
            cc = b.add(tile.c0, col)
            ok = b.and_(self._in_range(row, H),
                        b.and_(b.icmp_signed(">=", cc, I64(0)), b.icmp_signed("<", cc, W)))
            idx = b.select(ok, self._addr(tile, r, col), I64(0))
            v = self.from_mem(et, b.load(self.elem_ptr(tile.arr, idx), typ=mt))
            vals.append(b.select(ok, v, lt.pad))
        na = len(rows) if isinstance(A, LazyTile) else 0
        a_vals = dict(zip(rows, vals[:na])) if isinstance(A, LazyTile) else None
        b_vals = vals[na:] if isinstance(B, LazyTile) else None
        return a_vals, b_vals

    def _load_uniform(self, tile: Tile, pad, rereadable: bool = False) -> Vec:
        """Load a tile as uniform scalars (every lane the whole tile): the A operand of a GEMM,
        which the FMA loop broadcasts element by element. ``rereadable``: nothing writes its
        memory before the uses, which may read it again instead (:attr:`Vec.source`)."""
        b = self.b
        R, C = tile.type.shape
        et = tile.type.dtype
        mt = mem_type(et)
        H, W = tile.arr.dims
        inb = self._in_bounds(tile)
        with b.if_else(inb) as (then, otherwise):
            with then:
                fast = [self.from_mem(et, b.load(self.elem_ptr(tile.arr, self._addr(tile, r, I64(c))), typ=mt))
                        for r in range(R) for c in range(C)]
                blk_fast = b.block
            with otherwise:
                slow = []
                for r in range(R):
                    row = b.add(tile.r0, I64(r))
                    rok = self._in_range(row, H)
                    for c in range(C):
                        col = b.add(tile.c0, I64(c))
                        ok = b.and_(rok, self._in_range(col, W))
                        idx = b.select(ok, self._addr(tile, r, I64(c)), I64(0))
                        v = self.from_mem(et, b.load(self.elem_ptr(tile.arr, idx), typ=mt))
                        slow.append(b.select(ok, v, pad))
                blk_slow = b.block
        self.count("uniform load (GEMM A operand, broadcast)", R * C)
        vals = join_phis(b, fast, blk_fast, slow, blk_slow)
        source = LazyTile(tile, pad, inb, (R, C), et) if rereadable else None
        return Vec((R, C), et, [vals[r * C:(r + 1) * C] for r in range(R)], uniform=True, source=source)

    def op_xetile_store_tile(self, op):
        val = self.env[id(op.operands[0])]
        if val is STORED_IN_PLACE:   # tile_mma wrote it (LazyAcc)
            return None
        self._store_tile(op, val, self.env[id(op.operands[1])])
        return None

    def _store_tile(self, op, val: Vec, tile: Tile) -> None:
        """Store a tile's values: block writes or plain stores when in bounds, else masked."""
        t = tile.type
        R, C = t.shape
        G = self.col_groups(C)
        et = t.dtype
        b = self.b
        why = self._block_io_ok(tile)
        narrow = why is not None and self._block_read_narrow_ok(tile)
        if why is not None and not narrow:
            self.report.fallbacks.append(f"{op.loc}: store_tile {list(t.shape)}x{et}: plain stores ({why})")
        inb = self._in_bounds(tile)
        H, W = tile.arr.dims
        with b.if_else(inb) as (then, otherwise):
            with then:
                for r in range(R):
                    for g in range(G):
                        v = self.to_mem(et, val.regs[r][g])
                        if why is None:
                            ptr = b.gep(tile.arr.ptr, [self._addr(tile, r, I64(g * self.S))], source_etype=mem_type(et))
                            bi.block_write_u32(b, ptr, b.bitcast(v, I32) if et == f32 else v)
                            self.count("block_write_u32")
                        elif narrow:
                            ptr = self._fast_addr(tile, r, I64(g * self.S))
                            if et.bitwidth == 16:
                                bi.block_write_u16(b, ptr, b.bitcast(v, I16) if v.type != I16 else v)
                            else:
                                bi.block_write_u8(b, ptr, v)
                            self.count(f"block_write_u{et.bitwidth}")
                        else:
                            ptr = self._fast_addr(tile, r, self.col_index(C, g))
                            cv = self.col_valid(C, g)
                            self.count("store (in-bounds path)")
                            if cv is None:
                                b.store(v, ptr)
                            else:
                                with b.if_then(cv):
                                    b.store(v, ptr)
            with otherwise:
                for r in range(R):
                    row = b.add(tile.r0, I64(r))
                    rok = self._in_range(row, H)
                    for g in range(G):
                        col = b.add(tile.c0, self.col_index(C, g))
                        ok = b.and_(rok, self._in_range(col, W))
                        cv = self.col_valid(C, g)
                        if cv is not None:
                            ok = b.and_(ok, cv)
                        self.count("masked store (boundary path)")
                        with b.if_then(ok):
                            b.store(self.to_mem(et, val.regs[r][g]),
                                    self.elem_ptr(tile.arr, self._edge_addr(tile, r, self.col_index(C, g))))

    def op_xetile_atomic_rmw_tile(self, op):
        val: Vec = self.env[id(op.operands[0])]
        tile: Tile = self.env[id(op.operands[1])]
        kind = op.attributes["kind"]
        et = tile.type.dtype
        R, C = tile.type.shape
        G = self.col_groups(C)
        b = self.b
        H, W = tile.arr.dims
        if et.is_float and (et != f32 or kind not in ("add", "max", "min", "mul", "xchg")):
            raise self.err(op, f"atomic_rmw_tile <{kind}> on {et} is not supported")
        if not et.is_float and et.bitwidth not in (32, 64):
            raise self.err(op, f"atomic_rmw_tile on {et}: only 32/64-bit integers are supported")
        olds = []
        for r in range(R):
            row = b.add(tile.r0, I64(r))
            rok = self._in_range(row, H)
            for g in range(G):
                col = b.add(tile.c0, self.col_index(C, g))
                ok = b.and_(rok, self._in_range(col, W))
                cv = self.col_valid(C, g)
                if cv is not None:
                    ok = b.and_(ok, cv)
                v = val.regs[r][g]
                pre = b.block
                with b.if_then(ok):
                    ptr = self.elem_ptr(tile.arr, self._addr(tile, r, self.col_index(C, g)))
                    if et.is_float:
                        old = self.cas_loop(ptr, v, kind)
                        self.count("atomic CAS loop (f32)")
                    else:
                        llop = {"add": "add", "max": "max" if et.is_signed else "umax",
                                "min": "min" if et.is_signed else "umin", "and": "and", "or": "or",
                                "xor": "xor", "xchg": "xchg"}.get(kind)
                        if llop is None:
                            raise self.err(op, f"atomic_rmw_tile <{kind}> on {et} is not supported")
                        old = b.atomic_rmw(llop, ptr, v, "monotonic")
                        self.count(f"atomicrmw {llop}")
                    inner = b.block
                phi = b.phi(v.type)
                phi.add_incoming(old, inner)
                phi.add_incoming(ir.Constant(v.type, 0), pre)
                olds.append(phi)
        return Vec((R, C), et, [olds[r * G:(r + 1) * G] for r in range(R)])

    def offset_in_span(self, arr: Arr, off: ir.Value) -> ir.Value:
        """Whether element offset ``off`` lies in the array's memory span (the first to the last
        element its shape and strides reach): gathers and scatters never touch memory outside
        it, whatever the offsets (``array_span``)."""
        if not self._span_checks:
            return ir.Constant(ir.IntType(1), 1)
        return in_span(self.b, off, self._span[id(arr)])

    def checked_lane(self, op, kind: str, arr: Arr, mask: ir.Value, off: ir.Value) -> ir.Value:
        """i1: the lane accesses element ``off`` (its mask is set and ``off`` is in the span); in
        debug mode an unmasked lane out of the span is reported (codegen/bounds_debug.py)."""
        inside = self.offset_in_span(arr, off)
        if self.debug_sites is not None:
            if not self.debug_sites or self.debug_sites[-1]["_op"] is not op:
                self.debug_sites.append({**bounds_debug.site_record(op, kind, self._arr_name[id(arr)]), "_op": op})
            bounds_debug.emit_report(self.b, self.llfn.args[-1], len(self.debug_sites) - 1,
                                     self.b.and_(mask, self.b.not_(inside)), off)
        return self.b.and_(mask, inside)

    def op_xetile_load_gather(self, op):
        tile: Tile = self.env[id(op.operands[0])]
        mask: Vec = self.env[id(op.operands[1])]
        t = tile.type
        et = t.dtype
        b = self.b
        pad = self.const(et, op.attributes.get("padding", 0))
        R, C = t.shape
        regs = []
        for r in range(R):
            row = []
            for g in range(self.col_groups(C)):
                m = self.checked_lane(op, "load_gather", tile.arr, mask.regs[r][g], tile.offsets.regs[r][g])
                idx = b.select(m, tile.offsets.regs[r][g], I64(0))
                v = self.from_mem(et, b.load(self.elem_ptr(tile.arr, idx), typ=mem_type(et)))
                self.count("gather load")
                row.append(b.select(m, v, pad))
            regs.append(row)
        return Vec((R, C), et, regs)

    def op_xetile_store_scatter(self, op):
        val: Vec = self.env[id(op.operands[0])]
        mask: Vec = self.env[id(op.operands[1])]
        tile: Tile = self.env[id(op.operands[2])]
        et = tile.type.dtype
        b = self.b
        R, C = tile.type.shape
        for r in range(R):
            for g in range(self.col_groups(C)):
                m = mask.regs[r][g]
                cv = self.col_valid(C, g)
                if cv is not None:   # lanes beyond a narrow tile's columns hold no element
                    m = b.and_(m, cv)
                ok = self.checked_lane(op, "store_scatter", tile.arr, m, tile.offsets.regs[r][g])
                self.count("scatter store")
                with b.if_then(ok):
                    b.store(self.to_mem(et, val.regs[r][g]), self.elem_ptr(tile.arr, tile.offsets.regs[r][g]))
        return None

    # --- tile compute ----------------------------------------------------------------------------
    def op_xetile_tile_mma(self, op):
        A: Vec = self.env[id(op.operands[0])]
        B: Vec = self.env[id(op.operands[1])]
        if isinstance(A, Vec) and A.source is not None and isinstance(B, LazyTile):
            # read A again k-slice by k-slice like a fused load: a tile loaded before a loop
            # (attention's q) is not kept live in registers across it, and both operands lazy
            # take the k loops below (small code for the CPU driver)
            A = A.source
            self.count("A operand read again from memory (unwritten)")
        M, K = A.shape
        _, N = B.shape
        rt = op.result.type.dtype
        b = self.b
        G = self.col_groups(N)
        if M * G > MAX_ACC_VALUES:
            raise CompilerError(
                f"a {M}x{N} accumulator per subgroup is {M * G} lane values; the generic target "
                f"(CPU device) takes at most {MAX_ACC_VALUES} (e.g. 64x64): larger ones compile to megabytes "
                f"of code that the OpenCL CPU driver builds for minutes (or that crash LLVM). Use smaller "
                f"tiles or more subgroups (num_subgroups)", op)
        place = self.env[id(op.operands[2])] if len(op.operands) == 3 else None
        if isinstance(place, LazyAcc):
            # one register strip: its stores come after all reads of A and B, which may be views
            # of the accumulator's memory (a second strip would re-read B after the first's stores)
            if (isinstance(A, LazyTile) and isinstance(B, LazyTile) and not self._gathered_b_loop(B)
                    and M <= self._rows_per_strip(G)):
                place = place.tile
            else:   # not the fused form: load it here, the store_tile stores it
                self.count("tile_mma accumulator updated in place", -1)
                self.env[id(op.operands[2])] = self._load_tile(op, place.tile, place.pad)
                place = None
        else:
            place = None
        if place is not None:
            acc = [[None] * G for _ in range(M)]   # read strip by strip on the fast path
        elif len(op.operands) == 3:
            acc = [list(row) for row in self.env[id(op.operands[2])].regs]
        else:
            acc = [[self.const(rt, 0)] * G for _ in range(M)]
        tf32 = op.attributes.get("input_precision") == "tf32"
        isint = not rt.is_float
        a_ty = A.dtype

        def prep(x, t):
            if isint:
                return b.sext(x, I32) if t.is_signed else b.zext(x, I32)
            return self.tf32(x) if tf32 else x
        lazy = isinstance(A, LazyTile) or isinstance(B, LazyTile)
        Bp = None if isinstance(B, LazyTile) else [[prep(x, B.dtype) for x in row] for row in B.regs]
        # A in registers, B fused: k loops can read A with a shuffle whose lane is the loop
        # counter (its column group picked by a select: several when K > S)
        shuffled_a = isinstance(A, Vec) and not A.uniform and isinstance(B, LazyTile) and LOOP_BOUNDARY_MMA

        def steps(acc, fast, place=None):
            """``place``: the accumulator's tile, read before and written after each strip."""
            acc = [list(row) for row in acc]
            # register blocking: strips of RB rows, k inner, so a strip's accumulators stay in
            # vector registers; B rows are re-read per strip (from L1)
            rb = self._rows_per_strip(G) if (lazy and fast) else M
            if lazy and fast:
                self.count(f"GEMM register strips of {rb} rows (in-bounds path)", -(-M // rb))
            # tiles whose unrolled k steps exceed MAX_UNROLLED_FMAS loop over k within each strip:
            # the CPU driver's build time grows faster than the unrolled code (fp32 32x32x32:
            # 67 s unrolled)
            k_loop = lazy and fast and isinstance(B, LazyTile) and (
                isinstance(A, LazyTile) and M * K * G > MAX_UNROLLED_FMAS
                or shuffled_a and M * K * G > MAX_UNROLLED_SHUFFLED_FMAS)
            for m0 in range(0, M, rb):
                rows = range(m0, min(M, m0 + rb))
                # strips after the first re-read B at an address the compilers cannot prove equal
                # (+ strip * opaque zero): else they merge the loads and keep all of B live
                bump = b.mul(I64(m0 // rb), self._opaque_zero()) if m0 else None
                if place is not None:
                    for m in rows:
                        acc[m] = [self._acc_block_io(place, m, g) for g in range(G)]
                if k_loop:
                    strip_loop(acc, rows, bump)
                else:
                    strip(acc, fast, rows, bump)
                if place is not None:
                    for m in rows:
                        for g in range(G):
                            self._acc_block_io(place, m, g, acc[m][g])
            if k_loop:
                self.count("GEMM in-bounds path: k loop per strip", -(-M // rb))
            return acc

        def strip_loop(acc, rows, bump=None):
            """``strip`` on the in-bounds version as a loop over k (one column of A and row of B
            per step, the strip's accumulators as loop-carried values)."""
            pre = b.block
            loop = b.append_basic_block("mma_strip")
            done = b.append_basic_block("mma_strip_done")
            b.branch(loop)
            b.position_at_end(loop)
            kk = b.phi(I64, name="k")
            kk.add_incoming(I64(0), pre)
            phis = {}
            for m in rows:
                phis[m] = []
                for j in range(G):
                    p = b.phi(acc[m][j].type)
                    p.add_incoming(acc[m][j], pre)
                    phis[m].append(p)
            a_k, b_k = self._slice_vals(A, B, kk, rows, G, True, bump)
            Bp_k = [prep(x, B.dtype) for x in b_k]
            new = {}
            for m in rows:
                a = prep(a_k[m], a_ty) if a_k is not None else self._shuffled_a(A, m, kk, prep)
                new[m] = [b.add(phis[m][j], b.mul(a, Bp_k[j])) if isint else self.fma(a, Bp_k[j], phis[m][j])
                          for j in range(G)]
            nxt = b.add(kk, I64(1))
            latch = b.block
            kk.add_incoming(nxt, latch)
            for m in rows:
                for p, v in zip(phis[m], new[m]):
                    p.add_incoming(v, latch)
            b.cbranch(b.icmp_signed("<", nxt, I64(K)), loop, done)
            b.position_at_end(done)
            for m in rows:
                acc[m] = new[m]

        def strip(acc, fast, rows, bump=None):
            for k in range(K):
                g, lane = (k // self.S, k % self.S) if K >= self.S else (0, k)
                a_k = None
                if lazy:
                    a_k, b_k = self._slice_vals(A, B, k, rows, G, fast, bump)
                    if b_k is not None:
                        Bp_k = [prep(x, B.dtype) for x in b_k]
                if Bp is not None:
                    Bp_k = Bp[k]
                for m in rows:
                    if a_k is not None:
                        a = prep(a_k[m], a_ty)
                    elif A.uniform:
                        a = prep(A.regs[m][k], a_ty)
                    else:
                        a = self.shuffle(prep(A.regs[m][g], a_ty), I32(lane))
                    for j in range(G):
                        if isint:
                            acc[m][j] = b.add(acc[m][j], b.mul(a, Bp_k[j]))
                        else:
                            acc[m][j] = self.fma(a, Bp_k[j], acc[m][j])

        if not lazy:
            acc = steps(acc, True)
        else:
            # one uniform test per tile_mma: the in-bounds version runs branch-free with constant
            # offsets; the boundary version masks every load (docs/compiler.md)
            self.count("fused k-slice loads", K)
            conds = [x.inb for x in (A, B) if isinstance(x, LazyTile)]
            cond = conds[0] if len(conds) == 1 else b.and_(conds[0], conds[1])
            # B rows that are per-lane gathers (column-major or unaligned B, narrow types without
            # block reads): unrolled over k they made the CPU driver's build superlinear (fp16
            # column-major B 16x32x32: 48 s, 32x32x32: minutes), so the in-bounds version is a
            # k loop too, with plain loads
            loop_fast = (isinstance(A, LazyTile) or shuffled_a) and self._gathered_b_loop(B)
            if place is not None and self._assume_in_bounds:   # tested before the loop (op_scf_for)
                self._bases = {}
                steps(acc, True, place)
                self._bases = {}
                self.count("fma" if not isint else "int mul+add", M * K * G)
                return STORED_IN_PLACE
            if place is not None:
                # the accumulator's tile in bounds too; each path reads and writes it itself
                cond = b.and_(cond, self._in_bounds(place))
                with b.if_else(cond, likely=True) as (then, otherwise):
                    with then:
                        self._bases = {}
                        steps(acc, True, place)
                        self._bases = {}
                    with otherwise:
                        slow = self._mma_boundary_loop(A, B, self._acc_masked_io(place, M, G), M, K, G, prep, isint)
                        self._acc_masked_io(place, M, G, slow)
                self.count("fma" if not isint else "int mul+add", M * K * G)
                return STORED_IN_PLACE
            with b.if_else(cond, likely=True) as (then, otherwise):
                with then:
                    self._bases = {}
                    if loop_fast:
                        fast = self._mma_boundary_loop(A, B, acc, M, K, G, prep, isint, masked=False)
                    else:
                        fast = steps(acc, True)
                    self._bases = {}
                    bf = b.block
                with otherwise:
                    if LOOP_BOUNDARY_MMA and (isinstance(A, LazyTile) or shuffled_a) and isinstance(B, LazyTile):
                        slow = self._mma_boundary_loop(A, B, acc, M, K, G, prep, isint)
                    else:
                        slow = steps(acc, False)
                    bs = b.block
            acc = [join_phis(b, rf, bf, rs, bs) for rf, rs in zip(fast, slow)]
        self.count("fma" if not isint else "int mul+add", M * K * G)
        return Vec((M, N), rt, acc)

    def _gathered_b_loop(self, B) -> bool:
        """A lazy B whose in-bounds rows are per-lane loads (column-major or unaligned B, narrow
        types without block reads): tile_mma's in-bounds version is a k loop too (see there)."""
        return (LOOP_BOUNDARY_MMA and isinstance(B, LazyTile) and self._block_io_ok(B.tile) is not None
                and not self._block_read_narrow_ok(B.tile))

    def _acc_block_io(self, tile: Tile, r: int, g: int, value: ir.Value | None = None) -> ir.Value | None:
        """Read (``value`` None) or write row r, column group g of an in-bounds 32-bit row-major
        tile by one subgroup block read / write (an in-place tile_mma accumulator)."""
        b = self.b
        ptr = self._fast_addr(tile, r, I64(g * self.S))
        f32_ = tile.type.dtype == f32
        if value is None:
            self.count("block_read_u32")
            w = bi.block_read_u32(b, ptr)
            return b.bitcast(w, F32) if f32_ else w
        self.count("block_write_u32")
        bi.block_write_u32(b, ptr, b.bitcast(value, I32) if f32_ else value)
        return None

    def _opaque_zero(self) -> ir.Value:
        """A uniform i64 that is 0 at run time but not to the compilers (first array's dim 0 >> 62):
        register strips after the first add ``strip * opaque_zero`` to their B addresses, so
        neither LLVM nor the device compiler merges the re-reads and keeps all of B live."""
        z = self._bases.get("zero")
        if z is None:
            with self.b.goto_entry_block():
                self.b.position_after(self.lane)
                z = self.b.lshr(self._zero_src, I64(62), name="opaque_zero")
            self._bases["zero"] = z
        return z

    def _mma_boundary_loop(self, A, B, acc, M, K, G, prep, isint: bool = False, masked: bool = True):
        """acc += A @ B for fused loads of a tile not fully in bounds: a loop over k (one masked
        column of A and row of B per step); returns the accumulators after the loop.
        ``masked=False``: the tiles are known in bounds (plain loads). A may also be a Vec held in
        registers (read with a shuffle from lane k % S, ``_shuffled_a``)."""
        b = self.b
        if masked and isinstance(B, LazyTile) and self._block_io_ok(B.tile) is None and B.tile.arr.type.order == (1, 0):
            # B's rows by clamped block reads (_edge_row_read) where the array allows them,
            # else lane by lane
            with b.if_else(self._edge_rows_ok(B.tile), likely=True) as (then, otherwise):
                with then:
                    rows = self._mma_boundary_loop_body(A, B, acc, M, K, G, prep, isint, True, True)
                    br = b.block
                with otherwise:
                    lanes = self._mma_boundary_loop_body(A, B, acc, M, K, G, prep, isint, True, False)
                    bl = b.block
            return [join_phis(b, rr, br, rl, bl) for rr, rl in zip(rows, lanes)]
        return self._mma_boundary_loop_body(A, B, acc, M, K, G, prep, isint, masked, False)

    def _mma_boundary_loop_body(self, A, B, acc, M, K, G, prep, isint: bool, masked: bool, rows: bool):
        """The loop of :meth:`_mma_boundary_loop`; ``rows``: B's rows by :meth:`_edge_row_read`."""
        b = self.b
        C = B.shape[1]

        def b_row(kk: ir.Value, g: int) -> ir.Value:
            if rows:
                return self._edge_row_read(B.tile, kk, g, B.pad)
            return self._masked_load(B, kk, self.col_index(C, g), masked)

        def step(kk: ir.Value, flat: list) -> list:
            bk = [prep(b_row(kk, g), B.dtype) for g in range(G)]
            new = []
            for m in range(M):
                if isinstance(A, LazyTile):
                    a = prep(self._masked_load(A, I64(m), kk, masked), A.dtype)
                else:
                    a = self._shuffled_a(A, m, kk, prep)
                acc_m = flat[m * G:(m + 1) * G]
                new += [b.add(acc_m[g], b.mul(a, bk[g])) if isint else self.fma(a, bk[g], acc_m[g])
                        for g in range(G)]
            return new

        flat = counted_loop(b, K, [x for row in acc for x in row], step, ty=I64, name="mma_edge")
        new = [flat[m * G:(m + 1) * G] for m in range(M)]
        self.count("GEMM boundary path: k loop (clamped B row reads)" if rows else
                   "GEMM boundary path: k loop (masked loads)" if masked else "GEMM in-bounds path: k loop (gathered B rows)")
        return new

    def _edge_rows_ok(self, tile: Tile) -> ir.Value:
        """i1 (uniform): :meth:`_edge_row_read` may read ``tile``'s array (a row of at least S
        elements, at least one row)."""
        b = self.b
        H, W = tile.arr.dims
        return b.and_(b.icmp_signed(">=", W, I64(self.S)), b.icmp_signed(">=", H, I64(1)))

    def _edge_row_read(self, tile: Tile, r: ir.Value, g: int, pad: ir.Value) -> ir.Value:
        """Row r (tile-relative, i64), column group g of a 32-bit row-major tile not wholly in
        bounds, ``pad`` outside the array (needs :meth:`_edge_rows_ok`). One subgroup block read
        of S elements of the row clamped into the array (start in [0, W - S], the row in
        [0, H)) and a shuffle by the clamp's shift: every address is uniform, so the CPU driver
        emits one vector load and a permute. Per-lane addresses (a select of each lane's offset,
        or a load under a branch) became 64-bit gathers once the driver had unrolled the k loop
        and hoisted the lane's part of the address out of it (GEMV 1 x 2070 x 2048: 48 gathers
        in its full-subgroup code)."""
        b = self.b
        H, W = tile.arr.dims
        s0, _ = tile.arr.strides
        row = b.add(tile.r0, r)
        rok = self._in_range(row, H)
        start = b.add(tile.c0, I64(g * self.S))
        hi = b.sub(W, I64(self.S))
        cl = b.select(b.icmp_signed("<", start, I64(0)), I64(0), start)
        cl = b.select(b.icmp_signed(">", cl, hi), hi, cl)
        ptr = self.elem_ptr(tile.arr, b.add(b.mul(b.select(rok, row, I64(0)), s0), cl))
        self.count("block_read_u32 (clamped boundary row)")
        w = bi.block_read_u32(b, ptr)
        # lane l wants element start + l, at lane l + (start - cl) of w (in [0, S) when valid)
        src = b.add(self.lane32, b.trunc(b.sub(start, cl), I32))
        w = self.shuffle(w, b.and_(src, I32(self.S - 1)))
        col = b.add(start, self.lane)
        ok = b.and_(rok, self._in_range(col, W))
        v = b.bitcast(w, F32) if tile.type.dtype == f32 else w
        return b.select(ok, v, pad)

    def _shuffled_a(self, A: Vec, m: int, kk: ir.Value, prep) -> ir.Value:
        """Element (m, kk) of an A held in registers (column kk % S of column group kk // S), for
        every lane: a select of the group (uniform) then a shuffle from lane kk % S."""
        b, regs = self.b, A.regs[m]
        v, lane = regs[0], kk
        if len(regs) > 1:
            g = b.udiv(kk, I64(self.S))
            for j in range(1, len(regs)):
                v = b.select(b.icmp_unsigned("==", g, I64(j)), regs[j], v)
            lane = b.urem(kk, I64(self.S))
        return self.shuffle(prep(v, A.dtype), b.trunc(lane, I32))

    def _masked_load(self, lt: "LazyTile", r: ir.Value, col: ir.Value, masked: bool = True) -> ir.Value:
        """Element (r, col) of a lazy tile (tile-relative, i64), padding when out of bounds
        (``masked=False``: known in bounds, a plain load)."""
        b = self.b
        tile, et = lt.tile, lt.dtype
        mt = mem_type(et)
        if not masked:
            s0, s1 = tile.arr.strides
            idx = b.add(b.mul(b.add(tile.r0, r), s0), b.mul(b.add(tile.c0, col), s1))
            self.count("load (in-bounds k loop)")
            return self.from_mem(et, b.load(self.elem_ptr(tile.arr, idx), typ=mt))
        ok, ptr = self._lane_elem(tile, r, col)
        v = self.from_mem(et, b.load(ptr, typ=mt))
        self.count("masked load (boundary path)")
        return b.select(ok, v, lt.pad)

    def _lane_load(self, tile: Tile, r: ir.Value, col: ir.Value, pad: ir.Value) -> ir.Value:
        """Element (r, col) of a tile (tile-relative, i64), ``pad`` when out of bounds: a load
        under a branch at the lane's consecutive address (static order), which the CPU driver
        makes one masked vector load where the address is not loop-carried (an in-place
        accumulator row: vmovups {k} instead of a select of addresses and a gather)."""
        b = self.b
        et = tile.type.dtype
        ok = self._lane_ok(tile, r, col)
        pre = b.block
        with b.if_then(ok):
            v = self.from_mem(et, b.load(self._lane_ptr(tile, r, col), typ=mem_type(et)))
            blk = b.block
        ph = b.phi(v.type)
        ph.add_incoming(v, blk)
        ph.add_incoming(pad, pre)
        return ph

    def _lane_ok(self, tile: Tile, r: ir.Value, col: ir.Value) -> ir.Value:
        """Is element (r, col) of a tile (tile-relative, i64) in its array: the lane's column
        against uniform bounds (see :meth:`_lane_elem`)."""
        b = self.b
        H, W = tile.arr.dims
        row = b.add(tile.r0, r)
        return b.and_(self._in_range(row, H),
                      b.and_(b.icmp_signed(">=", col, b.neg(tile.c0)), b.icmp_signed("<", col, b.sub(W, tile.c0))))

    def _lane_ptr(self, tile: Tile, r: ir.Value, col: ir.Value) -> ir.Value:
        b = self.b
        s0, s1 = tile.arr.strides
        row = b.add(tile.r0, r)
        order = tile.arr.type.order
        if order == (1, 0):
            base, off = b.add(b.mul(row, s0), tile.c0), col
        elif order == (0, 1):
            base, off = b.add(row, b.mul(tile.c0, s1)), b.mul(col, s1)
        else:
            base, off = b.add(b.mul(row, s0), b.mul(tile.c0, s1)), b.mul(col, s1)
        return b.gep(self.elem_ptr(tile.arr, base), [off], source_etype=mem_type(tile.type.dtype))

    def _lane_elem(self, tile: Tile, r: ir.Value, col: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(in bounds?, pointer) of element (r, col) of a tile (tile-relative, i64; the pointer is
        element 0 of the array when out of bounds). The lane's column is compared with uniform
        bounds and added to a uniform row base: with ``c0 + col`` per lane, the CPU driver kept a
        loop-carried i64 vector of it per column group for a tile moving in a loop (GEMV: 16
        vector adds and 32 spill moves per tile on the in-bounds path)."""
        b = self.b
        s0, s1 = tile.arr.strides
        ok = self._lane_ok(tile, r, col)
        base = b.add(b.mul(b.add(tile.r0, r), s0), b.mul(tile.c0, s1))
        off = b.select(ok, b.mul(col, s1), b.neg(base))
        return ok, b.gep(self.elem_ptr(tile.arr, base), [off], source_etype=mem_type(tile.type.dtype))

    def _acc_masked_io(self, tile: Tile, M: int, G: int, values: list | None = None) -> list | None:
        """Read (``values`` None: padded with 0) or write (out-of-bounds elements dropped) an
        in-place tile_mma accumulator that is not wholly in bounds, M rows of G column groups."""
        b = self.b
        C = tile.type.shape[1]
        et = tile.type.dtype
        out = []
        for m in range(M):
            row = []
            for g in range(G):
                col = self.col_index(C, g)
                if values is None:
                    self.count("masked load (boundary path)")
                    row.append(self._lane_load(tile, I64(m), col, self.const(et, 0)))
                else:
                    self.count("masked store (boundary path)")
                    with b.if_then(self._lane_ok(tile, I64(m), col)):
                        b.store(self.to_mem(et, values[m][g]), self._lane_ptr(tile, I64(m), col))
            out.append(row)
        return out if values is None else None

    def op_xetile_tile_reduce(self, op):
        X: Vec = self.env[id(op.operands[0])]
        kind = op.attributes["kind"]
        dim = op.attributes["dims"][0]
        et = X.dtype
        R, C = X.shape
        G = self.col_groups(C)
        b = self.b
        if dim == 0:
            regs = list(X.regs[0])
            for r in range(1, R):
                regs = [self.combine(kind, et, x, y) for x, y in zip(regs, X.regs[r])]
            return Vec((1, C), et, [regs])
        ident = self.identity(kind, et)
        partial = []
        for r in range(R):
            acc = None
            for g in range(G):
                v = X.regs[r][g]
                cv = self.col_valid(C, g)
                if cv is not None:
                    v = b.select(cv, v, ident)
                acc = v if acc is None else self.combine(kind, et, acc, v)
            partial.append(acc)
        if R == 1 or R > self.S:   # one shuffle-xor butterfly per row: every lane gets its total
            out = []
            for acc in partial:
                step = 1
                while step < self.S:
                    acc = self.combine(kind, et, acc, self.shuffle(acc, b.xor(self.lane32, I32(step))))
                    step *= 2
                out.append([acc])
            self.count("butterfly reduction rows", R)
            return Vec((R, 1), et, out)
        # all rows at once, then each row's total read from its lanes (a uniform lane: a broadcast)
        v, shift = self.reduce_rows_across_lanes(partial, kind, et, self.lane32, self.S, self.shuffle)
        self.count("transposing butterfly reduction", 1)
        return Vec((R, 1), et, [[self.shuffle(v, I32(r << shift))] for r in range(R)])

    def op_xetile_tile_broadcast(self, op):
        X: Vec = self.env[id(op.operands[0])]
        dims = op.attributes["dims"]
        R, C = op.result.type.shape
        G = self.col_groups(C)
        regs = []
        for r in range(R):
            sr = 0 if 0 in dims else r
            if 1 in dims:
                regs.append([X.regs[sr][0]] * G)
            else:
                regs.append(list(X.regs[sr]))
        return Vec((R, C), X.dtype, regs)

    # --- data exchange between subgroups (shared local memory) ---------------------------------
    def op_gpu_slm_alloc(self, op):
        t = op.result.type
        ty = reg_type(t.dtype)
        h, w = t.shape
        return (bi.slm_array(self.module, ty, h * w), w, ty)

    def op_gpu_barrier(self, op):
        bi.barrier(self.b)
        self.count("workgroup barrier")

    def _slm_index(self, buf, r0, c0, r: int, col: ir.Value, transpose: bool) -> ir.Value:
        """Buffer index of element (r, col) of a window at (r0, c0); transposed windows read
        element (r, col) from buffer (r0 + col, c0 + r)."""
        b = self.b
        _, W, _ = buf
        if transpose:
            return b.add(b.mul(b.add(r0, col), I64(W)), b.add(c0, I64(r)))
        return b.add(b.mul(b.add(r0, I64(r)), I64(W)), b.add(c0, col))

    def op_gpu_slm_store(self, op):
        X: Vec = self.env[id(op.operands[0])]
        buf = self.env[id(op.operands[1])]
        r0, c0 = (self.env[id(v)] for v in op.operands[2:])
        arr, _, ty = buf
        R, C = X.shape
        b = self.b
        for r in range(R):
            for g in range(self.col_groups(C)):
                ptr = b.gep(arr, [self._slm_index(buf, r0, c0, r, self.col_index(C, g), False)],
                            source_etype=ty)
                cv = self.col_valid(C, g)
                if cv is None:
                    b.store(X.regs[r][g], ptr)
                else:
                    with b.if_then(cv):
                        b.store(X.regs[r][g], ptr)
        self.count("SLM store (per lane)")

    def op_gpu_slm_load(self, op):
        buf = self.env[id(op.operands[0])]
        r0, c0 = (self.env[id(v)] for v in op.operands[1:])
        arr, _, ty = buf
        t = op.result.type
        R, C = t.shape
        tr = bool(op.attributes.get("transpose"))
        b = self.b
        regs = []
        for r in range(R):
            row = []
            for g in range(self.col_groups(C)):
                col = self.col_index(C, g)
                if C >= self.S and C % self.S:     # lanes past the last column read column 0
                    col = b.select(self.col_valid(C, g), col, I64(0))
                idx = self._slm_index(buf, r0, c0, r, col, tr)
                row.append(b.load(b.gep(arr, [idx], source_etype=ty), typ=ty))
            regs.append(row)
        self.count("SLM load (per lane)" + (", transposed" if tr else ""))
        return Vec((R, C), t.dtype, regs)

    # --- control flow ------------------------------------------------------------------------------
    def op_scf_for(self, op):
        lb, ub, step, *inits = (self.env[id(v)] for v in op.operands)
        body = op.regions[0].block
        if not inits and not self._assume_in_bounds and _in_place_mma_loop(body):
            split = self._in_bounds_prefix(body, lb, ub, step)
            if split is not None:
                # loop versioning: the iterations [lb, split) are in bounds (tested before the
                # loop), and run without the per-tile test and masked code (only without them
                # the CPU driver kept b's row offsets and the accumulators in registers;
                # docs/compiler.md); the rest (a ragged last tile) take the full loop
                saved = self._report_copy()   # the counts stay per source op
                self._assume_in_bounds = True
                try:
                    self._for_loop(body, lb, split, step, [])
                finally:
                    self._assume_in_bounds = False
                    self.report = saved
                self.count("loops versioned on a hoisted bounds test")
                return self._for_loop(body, split, ub, step, [])
        return self._for_loop(body, lb, ub, step, inits)

    def _in_bounds_prefix(self, body, lb: ir.Value, ub: ir.Value, step: ir.Value) -> ir.Value | None:
        """The end of the loop's iterations from ``lb`` whose tile_mmas are in bounds, computed
        before the loop: ``ub`` when all are, the last iteration when all but it are, else ``lb``
        (None: a tile_mma is not the fused in-place form). The tiles' coordinates are affine in
        the induction variable (``_in_place_mma_loop``) and each bound is an interval, so two
        iterations in bounds prove those between them."""
        b = self.b
        saved = self._report_copy()
        runs = b.and_(b.icmp_signed(">", step, I64(0)), b.icmp_signed("<", lb, ub))
        # (a step of 0 runs nothing here, but an sdiv by 0 would be undefined behaviour in LLVM)
        safe_step = b.select(b.icmp_signed(">", step, I64(0)), step, I64(1))
        last = b.add(lb, b.mul(b.sdiv(b.sub(b.sub(ub, lb), I64(1)), safe_step), step))
        before = b.sub(last, step)
        conds = []
        try:
            for iv in (lb, last, before):
                self.env[id(body.args[0])] = iv
                cond = self._body_bounds(body)
                if cond is None:
                    return None
                conds.append(cond)
        finally:
            self.report = saved
        first_ok = b.and_(runs, conds[0])
        all_ok = b.and_(first_ok, conds[1])
        but_last = b.and_(b.and_(first_ok, conds[2]), b.icmp_signed(">=", before, lb))
        return b.select(all_ok, ub, b.select(but_last, last, lb))

    def _body_bounds(self, body) -> ir.Value | None:
        """The bounds tests of the body's in-place tile_mmas, its other ops lowered (pure: they
        make tiles; the tile_mmas and their stores are not emitted), None when one is not the
        fused in-place form."""
        mmas = {id(o.result) for o in body.ops if o.name == "xetile.tile_mma"}
        cond = None
        for o in body.ops:
            if o.name == "scf.yield":
                break
            if o.name == "xetile.tile_mma":
                c = self._in_place_mma_bounds(o)
                if c is None:
                    return None
                cond = c if cond is None else self.b.and_(cond, c)
            elif not (o.name == "xetile.store_tile" and id(o.operands[0]) in mmas):
                res = self.lower_op(o)
                if res is not None:
                    for r, v in zip(o.results, res if isinstance(res, list) else [res]):
                        self.env[id(r)] = v
        return cond

    def _report_copy(self) -> LoweringReport:
        r = self.report
        return LoweringReport(Counter(r.instructions), list(r.fallbacks), r.regs_bytes_per_lane)

    def _in_place_mma_bounds(self, op) -> ir.Value | None:
        """The bounds test of ``op``'s fused in-place form (as op_xetile_tile_mma takes it), or
        None when the operands as lowered do not take that form."""
        A, B, place = (self.env[id(v)] for v in op.operands)
        if isinstance(A, Vec) and A.source is not None:
            A = A.source
        if not (isinstance(A, LazyTile) and isinstance(B, LazyTile) and isinstance(place, LazyAcc)):
            return None
        if self._gathered_b_loop(B) or A.shape[0] > self._rows_per_strip(self.col_groups(B.shape[1])):
            return None
        return self.b.and_(self.b.and_(A.inb, B.inb), self._in_bounds(place.tile))

    def _for_loop(self, body, lb: ir.Value, ub: ir.Value, step: ir.Value, inits: list) -> list:
        b = self.b
        flats = [self._flatten(v) for v in inits]
        for i in self._mma_accumulators(body):
            flats[i] = [self._opaque_constant(x) for x in flats[i]]
        pre = b.block
        header = b.append_basic_block("for_header")
        body_bb = b.append_basic_block("for_body")
        exit_bb = b.append_basic_block("for_exit")
        b.branch(header)
        b.position_at_end(header)
        iv = b.phi(I64, name="iv")
        iv.add_incoming(lb, pre)
        phis = []
        for vals in flats:
            ps = []
            for x in vals:
                p = b.phi(x.type)
                p.add_incoming(x, pre)
                ps.append(p)
            phis.append(ps)
        b.cbranch(b.icmp_signed("<", iv, ub), body_bb, exit_bb)
        b.position_at_end(body_bb)
        self.env[id(body.args[0])] = iv
        for a, init, ps in zip(body.args[1:], inits, phis):
            self.env[id(a)] = self._rebuild(init, ps)
        yielded = self.lower_block(body.ops)
        latch = b.block
        iv.add_incoming(b.add(iv, step), latch)
        for ps, y in zip(phis, yielded):
            ys = self._flatten(y)
            for p, v in zip(ps, ys):
                p.add_incoming(v, latch)
        b.branch(header)
        b.position_at_end(exit_bb)
        return [self._rebuild(init, ps) for init, ps in zip(inits, phis)]

    @staticmethod
    def _mma_accumulators(body) -> list[int]:
        """Indices of a loop's carried values that enter a tile_mma of its body as the accumulator."""
        accs = {id(u.operands[2]) for u in body.ops if u.name == "xetile.tile_mma" and len(u.operands) == 3}
        return [i for i, a in enumerate(body.args[1:]) if id(a) in accs]

    def _opaque_constant(self, x: ir.Value) -> ir.Value:
        """A constant GEMM accumulator entering a k loop (``acc = zeros`` before ``for k``) as the
        same bits computed at run time (or'ed with an opaque zero): with a constant there, the OpenCL
        CPU driver's vectorizer predicated the whole loop (a lane mask on every FMA operand: fp32
        1024^3 38.6 against 87.8 GFLOP per CPU-second with a run-time zero)."""
        if not isinstance(x, ir.Constant) or x.type not in (F32, I32) or self._zero_src is None:
            return x
        b = self.b
        with b.goto_entry_block():
            b.position_after(self.lane)
            z = b.trunc(b.lshr(self._zero_src, I64(62)), I32, name="opaque_zero32")
        if x.type == I32:
            return b.or_(x, z)
        bits = int(np.float32(x.constant).view(np.uint32))
        return b.bitcast(b.or_(I32(bits), z), F32)

    def _flatten(self, v):
        if isinstance(v, (Vec, Tile)):
            return v.flat()
        if isinstance(v, ir.Value):
            return [v]
        raise CompilerError(f"cannot carry {type(v).__name__} through a loop")

    def _rebuild(self, like, vals):
        if isinstance(like, (Vec, Tile)):
            return like.rebuild(list(vals))
        return vals[0]




for _c in ("arith.extf", "arith.truncf", "arith.sitofp", "arith.uitofp", "arith.fptosi", "arith.fptoui",
           "arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast"):
    setattr(GenericLowering, "op_" + _c.replace(".", "_"), GenericLowering.op_cast)


#: ops through which a value of a versioned loop may depend on its induction variable
_AFFINE_OPS = ("arith.addi", "arith.subi", "arith.muli", "arith.index_cast")
_TILE_USES = ("xetile.load_tile", "xetile.tile_mma", "xetile.store_tile")


def _in_place_mma_loop(body) -> bool:
    """A loop body whose memory writes are tile_mma accumulators stored back in place
    (``store_tile(t, tile_mma(a, b, load_tile(t)))``, the GEMV's column loop: one per register
    strip), without nested regions, barriers or prints, where tile coordinates are affine in the
    induction variable (sums and products with loop-invariant values) and nothing else depends
    on it."""
    mmas = [o for o in body.ops if o.name == "xetile.tile_mma"]
    if not mmas or any(len(m.operands) != 3 or len(m.result.uses) != 1 for m in mmas):
        return False
    stores = {id(m.result.uses[0][0]) for m in mmas}
    if any(m.result.uses[0][0].name != "xetile.store_tile" for m in mmas):
        return False
    dep, affine = {id(body.args[0])}, {id(body.args[0])}
    for o in body.ops:
        if o.regions or o.name.startswith(("gpu.", "xejit.print")) or (o.name in WRITES and id(o) not in stores):
            return False
        ins = [v for v in o.operands if id(v) in dep]
        if not ins:
            continue
        dep.update(id(r) for r in o.results)
        if o.name == "xetile.init_tile":
            if id(o.operands[0]) in dep or any(id(v) not in affine for v in ins):
                return False
        elif o.name in _AFFINE_OPS:
            if any(id(v) not in affine for v in ins) or o.name == "arith.muli" and len(ins) > 1:
                return False
            affine.update(id(r) for r in o.results)
        elif o.name not in _TILE_USES:
            return False
    return True


def lower(fn: Function, target, num_subgroups: int, debug: bool = False,
          span_checks: bool = True, addresses: bool = False) -> GenericLowering:
    """xetile-sg -> LLVM IR. Returns the lowering object (``.module``, ``.arg_kinds``,
    ``.arg_plan``, ``.report``, ``.debug_sites``). ``debug``: report out-of-range gathers and
    scatters (``XEJIT_DEBUG=1``, codegen/bounds_debug.py); ``span_checks=False`` drops the span
    check of gathers and scatters -- memory-unsafe, for benchmarks/bench_gather_bounds.py only.
    ``addresses``: arrays are passed as 64-bit addresses (codegen/abi.py)."""
    lw = GenericLowering(fn, target, num_subgroups, debug=debug, span_checks=span_checks, addresses=addresses)
    lw.run()
    if lw.debug_sites is not None:
        lw.debug_sites = [{k: v for k, v in s.items() if k != "_op"} for s in lw.debug_sites]
    return lw
