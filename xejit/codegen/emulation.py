"""DPAS and 2D block IO instructions, real or emulated, behind one function per variant.

Lowering never calls a ``__spirv_*`` matrix / 2D block builtin itself.  It asks this module for
the xejit-internal function of an instruction *variant* (``declare_dpas``, ``declare_block_load``,
``declare_block_store``, ``declare_block_prefetch``) and calls it.  That function has the same
operands as the SPIR-V instruction minus the compile-time literals, and its body comes from one
table, :data:`IMPLEMENTATIONS`, keyed by the variant's kind:

* ``emulate=False`` (real GPUs): a one-call wrapper (``alwaysinline``) around the Itanium-mangled
  ``__spirv_SubgroupMatrixMultiplyAccumulateINTEL`` / ``__spirv_Subgroup2DBlock*INTEL`` builtin,
  which LLVM's SPIR-V backend turns into the instruction;
* ``emulate=True`` (the CPU device): LLVM IR with exactly the per-invocation semantics of
  SPV_INTEL_subgroup_matrix_multiply_accumulate and SPV_INTEL_2d_block_io ("Mapping ... to
  Invocations", "Out-of-Bounds Behavior"), built from subgroup shuffles, loads and stores: a
  loop over K (DPAS, in a ``noinline`` function) or over the lane's elements (block IO), so the
  CPU driver's build time grows less with the number of call sites and the block size.

Signatures (``G`` = ``ptr addrspace(1)``, ``P`` = private ``ptr``, ``<2 x i32>`` = (x, y) coordinate
in elements; width and pitch in bytes, height in rows, as in the SPIR-V ops):

* DPAS:            ``C dpas(A a, B b, C c)``
* block load(*):   ``void load(G base, i32 width, i32 height, i32 pitch, <2 x i32> coord, P dst)``
* block prefetch:  ``void prefetch(G base, i32 width, i32 height, i32 pitch, <2 x i32> coord)``
* block store:     ``void store(P src, G base, i32 width, i32 height, i32 pitch, <2 x i32> coord)``

The per-lane types and counts are given by :meth:`DpasVariant.types` and
:meth:`BlockVariant.lane_elems`.  The functions assume the kernel's subgroup size is the target's
(``target.subgroup_size``) and that the whole subgroup calls them (both specs require it).

Example:
    >>> from xejit.codegen import builtins as bi
    >>> from xejit.codegen.targets import get_target
    >>> m = bi.new_module("t")
    >>> f = declare_dpas(m, get_target("pvc"), "bf16", "bf16", "f32", 8, emulate=True)
    >>> f.name, str(f.function_type)
    ('__xejit_dpas_sg16_bf16_bf16_f32_m8', '<8 x float> (<8 x i16>, <8 x i32>, <8 x float>)')
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir

from . import builtins as bi
from .lowering_base import counted_loop
from .targets import Target, check_block_shape

__all__ = [
    "BUILD_OPTIONS",
    "IMPLEMENTATIONS",
    "BlockVariant",
    "DpasVariant",
    "declare_block_load",
    "declare_block_prefetch",
    "declare_block_store",
    "declare_dpas",
    "declare_variant",
    "dpas_flags",
    "emulated_name",
    "inline_or_outlined",
    "real_builtin_name",
]

I1, I8, I16, I32, I64 = ir.IntType(1), bi.I8, bi.I16, bi.I32, bi.I64
F16, F32 = bi.F16, bi.F32
VOID = bi.VOID
GLOBAL = bi.GLOBAL
PRIVATE = ir.PointerType()           # addrspace 0 = SPIR-V Function storage class
V2I32 = ir.VectorType(I32, 2)

#: The CPU driver's build options for an emulated kernel. Its optimising build of the emulated
#: attention backward took 12-18 s of CPU (the vectorizer keeps each lane's vectors lane-major:
#: most of the 76k-102k instructions were transposes and spills, docs/compiler.md); unoptimised it
#: takes a third of that. Emulation proves results, so its run time matters less. The driver's
#: -O0 build keeps subgroups (widening by the subgroup size) only with
#: ``CL_CONFIG_CPU_O0_VECTORIZATION=True``, which ``runtime/_icd.py`` sets before the runtime loads:
#: without it the emulated attention kernels crashed in the driver's scalar subgroup code.
BUILD_OPTIONS = "-cl-opt-disable"

_ELEM_BITS = {"tf32": 32, "bf16": 16, "fp16": 16, "int8": 8, "uint8": 8}
_ACC_IR = {"f32": F32, "i32": I32}

# Matrix Multiply Accumulate Operands (SPV_INTEL_subgroup_matrix_multiply_accumulate).
_A_FLAGS = {"int8": 0x1 | 0x10, "uint8": 0x10, "tf32": 0x100, "fp16": 0x400, "bf16": 0x1000}
_B_FLAGS = {"int8": 0x2 | 0x20, "uint8": 0x20, "tf32": 0x200, "fp16": 0x800, "bf16": 0x2000}


def _pow2_ceil(x: int) -> int:
    return 1 << (x - 1).bit_length()


def _vec(ty: ir.Type, n: int) -> ir.Type:
    return ty if n == 1 else ir.VectorType(ty, n)


# --------------------------------------------------------------------------------------------
# Variants
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DpasVariant:
    """``D = A (M x K) @ B (K x N) + C`` with N = ``sg`` and K = 256 bits / element bits."""

    sg: int
    a_ty: str
    b_ty: str
    acc_ty: str
    m: int
    kind: str = "dpas"

    def __post_init__(self):
        for t in (self.a_ty, self.b_ty):
            if t not in _ELEM_BITS:
                raise ValueError(f"DPAS operand type {t!r} not in {tuple(_ELEM_BITS)}")
        if _ELEM_BITS[self.a_ty] != _ELEM_BITS[self.b_ty]:
            raise ValueError(f"DPAS operand types {self.a_ty!r} / {self.b_ty!r} differ in size")
        if self.acc_ty not in _ACC_IR:
            raise NotImplementedError(f"DPAS accumulator {self.acc_ty!r}: only f32 and i32 are implemented")
        want = "i32" if self.a_ty in ("int8", "uint8") else "f32"
        if self.acc_ty != want:
            raise ValueError(f"DPAS on {self.a_ty} accumulates in {want}, not {self.acc_ty}")
        if self.m not in (1, 2, 4, 8) or self.sg not in (8, 16):
            raise ValueError(f"DPAS needs M in (1, 2, 4, 8) and subgroup size 8 or 16 (M={self.m}, sg={self.sg})")

    @property
    def elem_bits(self) -> int:
        return _ELEM_BITS[self.a_ty]

    @property
    def k(self) -> int:
        return 256 // self.elem_bits

    @property
    def a_pack(self) -> int:
        """Columns of A per lane value (K > N: packed, low column in low bits), else 1."""
        return max(1, self.k // self.sg)

    @property
    def a_rows_split(self) -> int:
        """Lanes sharing one column of A (K < N: every r-th row per lane), else 1."""
        return max(1, self.sg // self.k)

    @property
    def a_len(self) -> int:
        return -(-self.m // self.a_rows_split)

    @property
    def b_len(self) -> int:
        return self.k * self.elem_bits // 32

    def types(self) -> tuple[ir.Type, ir.Type, ir.Type]:
        """Per-lane LLVM types of (A, B, C) (C is also the result's type)."""
        if self.a_ty == "tf32":
            a_el = F32
        else:
            a_el = ir.IntType(self.elem_bits * self.a_pack)
        b_el = F32 if self.b_ty == "tf32" else I32
        return _vec(a_el, self.a_len), _vec(b_el, self.b_len), _vec(_ACC_IR[self.acc_ty], self.m)

    @property
    def name(self) -> str:
        return f"__xejit_dpas_sg{self.sg}_{self.a_ty}_{self.b_ty}_{self.acc_ty}_m{self.m}"

    def function_type(self) -> ir.FunctionType:
        a, b, c = self.types()
        return ir.FunctionType(c, [a, b, c])


@dataclass(frozen=True)
class BlockVariant:
    """One 2D block instruction: ``kind`` in load / load_transform / load_transpose / prefetch / store."""

    kind: str
    sg: int
    elem_bits: int
    width: int
    height: int
    count: int = 1

    def __post_init__(self):
        if self.kind not in ("load", "load_transform", "load_transpose", "prefetch", "store"):
            raise ValueError(f"unknown 2D block op {self.kind!r}")
        if self.elem_bits not in (8, 16, 32, 64):
            raise ValueError(f"2D block element size {self.elem_bits} bits not in (8, 16, 32, 64)")
        if self.kind == "load_transform" and self.elem_bits not in (8, 16):
            raise ValueError("2D block transform needs 8- or 16-bit elements")
        if self.sg & (self.sg - 1) or min(self.width, self.height, self.count) < 1:
            raise ValueError(f"bad 2D block variant {self}")

    @property
    def elem_bytes(self) -> int:
        return self.elem_bits // 8

    @property
    def vnni(self) -> int:
        """Rows packed per 32-bit value by the transform (1 when not transforming)."""
        return 32 // self.elem_bits if self.kind == "load_transform" else 1

    @property
    def lane_bits(self) -> int:
        """Bits of one per-lane element of the destination / source storage."""
        return 32 if self.kind == "load_transform" else self.elem_bits

    def post_shape(self) -> tuple[int, int]:
        """(rows, padded columns) of one block after padding / transform / transpose."""
        if self.kind == "load_transpose":
            return self.width, _pow2_ceil(self.height)
        rows = -(-self.height // self.vnni)
        return rows, _pow2_ceil(self.width)

    def per_block(self) -> int:
        rows, cols = self.post_shape()
        if cols <= self.sg:
            return -(-rows // (self.sg // cols))
        return rows * (cols // self.sg)

    def lane_elems(self) -> int:
        """Number of per-lane elements (of ``lane_bits``) in the destination / source storage."""
        return 0 if self.kind == "prefetch" else self.per_block() * self.count

    @property
    def name(self) -> str:
        return (f"__xejit_2d_{self.kind}_sg{self.sg}_e{self.elem_bits}_w{self.width}"
                f"_h{self.height}_c{self.count}")

    def function_type(self) -> ir.FunctionType:
        surf = [GLOBAL, I32, I32, I32, V2I32]
        if self.kind == "store":
            return ir.FunctionType(VOID, [PRIVATE] + surf)
        if self.kind == "prefetch":
            return ir.FunctionType(VOID, surf)
        return ir.FunctionType(VOID, surf + [PRIVATE])


Variant = DpasVariant | BlockVariant


def emulated_name(kind: str, **params) -> str:
    """The xejit-internal function name of an instruction variant (same for real and emulated).

    ``emulated_name("dpas", sg=16, a_ty="bf16", b_ty="bf16", acc_ty="f32", m=8)``,
    ``emulated_name("load_transform", sg=16, elem_bits=16, width=16, height=16, count=1)``.
    """
    if kind == "dpas":
        return DpasVariant(**params).name
    return BlockVariant(kind, **params).name


# --------------------------------------------------------------------------------------------
# Real builtins (Itanium-mangled __spirv_* names)
# --------------------------------------------------------------------------------------------

def _mangle_type(ty: ir.Type, subs: list[str]) -> str:
    if isinstance(ty, ir.VectorType):
        code = f"Dv{ty.count}_{_mangle_type(ty.element, subs)}"
        if code in subs:
            i = subs.index(code)
            return "S_" if i == 0 else f"S{i - 1}_"
        subs.append(code)
        return code
    if isinstance(ty, ir.IntType):
        return {8: "c", 16: "s", 32: "i", 64: "l"}[ty.width]
    if isinstance(ty, ir.FloatType):
        return "f"
    if isinstance(ty, ir.HalfType):
        return "Dh"
    raise NotImplementedError(f"cannot mangle {ty}")


def _mangle(name: str, params: list[ir.Type]) -> str:
    subs: list[str] = []
    return f"_Z{len(name)}{name}" + "".join(_mangle_type(t, subs) for t in params)


_BLOCK_BUILTINS = {
    # Operands: Element Size, Block Width, Block Height, Block Count (i32 literals), then the rest.
    "load": "_Z32__spirv_Subgroup2DBlockLoadINTELiiiiPU3AS1KviiiDv2_iPv",
    "load_transform": "_Z41__spirv_Subgroup2DBlockLoadTransformINTELiiiiPU3AS1KviiiDv2_iPv",
    "load_transpose": "_Z41__spirv_Subgroup2DBlockLoadTransposeINTELiiiiPU3AS1KviiiDv2_iPv",
    "prefetch": "_Z36__spirv_Subgroup2DBlockPrefetchINTELiiiiPU3AS1KviiiDv2_i",
    "store": "_Z33__spirv_Subgroup2DBlockStoreINTELiiiiPKvPU3AS1viiiDv2_i",
}


def dpas_flags(v: DpasVariant) -> int:
    """The *Matrix Multiply Accumulate Operands* literal of a DPAS variant."""
    return _A_FLAGS[v.a_ty] | _B_FLAGS[v.b_ty]


def real_builtin_name(v: Variant) -> str:
    """The mangled ``__spirv_*`` builtin a variant maps to on real hardware."""
    if isinstance(v, DpasVariant):
        a, b, c = v.types()
        return _mangle("__spirv_SubgroupMatrixMultiplyAccumulateINTEL", [I32, a, b, c, I32])
    return _BLOCK_BUILTINS[v.kind]


def _real_dpas(fn: ir.Function, v: DpasVariant) -> None:
    a, b, c = v.types()
    decl = bi.declare(fn.module, real_builtin_name(v), c, [I32, a, b, c, I32])
    bld = ir.IRBuilder(fn.append_basic_block("entry"))
    bld.ret(bi.call(bld, decl, [I32(v.k), *fn.args, I32(dpas_flags(v))]))


def _real_block(fn: ir.Function, v: BlockVariant) -> None:
    ft = v.function_type()
    decl = bi.declare(fn.module, real_builtin_name(v), VOID, [I32] * 4 + list(ft.args))
    bld = ir.IRBuilder(fn.append_basic_block("entry"))
    lits = [I32(v.elem_bytes), I32(v.width), I32(v.height), I32(v.count)]
    bi.call(bld, decl, lits + list(fn.args))
    bld.ret_void()


# --------------------------------------------------------------------------------------------
# Emulation: DPAS
# --------------------------------------------------------------------------------------------

def _fma(bld: ir.IRBuilder, a, b, c):
    f = bld.module.globals.get("llvm.fma.f32")
    if f is None:
        f = ir.Function(bld.module, ir.FunctionType(F32, [F32, F32, F32]), "llvm.fma.f32")
    return bld.call(f, [a, b, c])


def _to_i32(bld: ir.IRBuilder, x: ir.Value) -> ir.Value:
    if isinstance(x.type, ir.FloatType):
        return bld.bitcast(x, I32)
    if x.type.width < 32:
        return bld.zext(x, I32)
    return x


def _decode(bld: ir.IRBuilder, bits: ir.Value, ty: str) -> ir.Value:
    """An operand element given as the low bits of an i32 -> f32 (floats) or i32 (integers)."""
    if ty == "bf16":
        return bld.bitcast(bld.shl(bld.and_(bits, I32(0xFFFF)), I32(16)), F32)
    if ty == "fp16":
        return bld.fpext(bld.bitcast(bld.trunc(bits, I16), F16), F32)
    if ty == "tf32":
        # tf32 keeps sign, 8-bit exponent and 10-bit mantissa: the low 13 bits are ignored.
        return bld.bitcast(bld.and_(bits, I32(0xFFFFE000)), F32)
    if ty == "int8":
        return bld.sext(bld.trunc(bits, I8), I32)
    if ty == "uint8":
        return bld.and_(bits, I32(0xFF))
    raise AssertionError(ty)


def _elements(bld: ir.IRBuilder, v: ir.Value, n: int) -> list[ir.Value]:
    if n == 1 and not isinstance(v.type, ir.VectorType):
        return [v]
    return [bld.extract_element(v, I32(i)) for i in range(n)]


def _emu_dpas(fn: ir.Function, v: DpasVariant) -> None:
    """A loop over K (one column of A and row of B per step, the M accumulators loop-carried):
    unrolled, the M*K FMAs and shuffles of every variant made the CPU driver's build slow."""
    a, b, c = fn.args
    entry = fn.append_basic_block("entry")
    bld = ir.IRBuilder(entry)
    eb = v.elem_bits
    a_vals = [_to_i32(bld, x) for x in _elements(bld, a, v.a_len)]
    b_vec = b if isinstance(b.type, ir.VectorType) else None
    c_vals = _elements(bld, c, v.m)

    def step(k: ir.Value, accs: list) -> list:
        # B: this lane's column, K rows; 16-bit and smaller elements VNNI-packed in 32-bit values.
        if eb == 32:
            word = _to_i32(bld, bld.extract_element(b_vec, k) if b_vec is not None else b)
            col = _decode(bld, word, v.b_ty)
        else:
            per = 32 // eb
            word = bld.extract_element(b_vec, bld.udiv(k, I32(per)))
            col = _decode(bld, bld.lshr(word, bld.mul(bld.urem(k, I32(per)), I32(eb))), v.b_ty)
        out = []
        for m in range(v.m):
            # A: element (m, k) lives in lane/component/bit offset given by the spec's three cases.
            if v.a_rows_split > 1:          # K < N: lane k + K*(m % r) holds row m in component m // r
                lane, comp, shift = bld.add(k, I32(v.k * (m % v.a_rows_split))), m // v.a_rows_split, None
            else:                           # K >= N: lane k // p holds columns packed low to high
                lane, comp = (bld.udiv(k, I32(v.a_pack)) if v.a_pack > 1 else k), m
                shift = bld.mul(bld.urem(k, I32(v.a_pack)), I32(eb)) if v.a_pack > 1 else None
            word = bi.shuffle(bld, a_vals[comp], lane, kind="i32")
            x = _decode(bld, bld.lshr(word, shift) if shift is not None else word, v.a_ty)
            if v.acc_ty == "f32":
                out.append(_fma(bld, x, col, accs[m]))
            else:
                out.append(bld.add(accs[m], bld.mul(x, col)))
        return out

    out = counted_loop(bld, v.k, c_vals, step, name="k")
    if v.m == 1:
        bld.ret(out[0])
        return
    res = ir.Constant(c.type, ir.Undefined)
    for m, x in enumerate(out):
        res = bld.insert_element(res, x, I32(m))
    bld.ret(res)


# --------------------------------------------------------------------------------------------
# Emulation: 2D block IO
# --------------------------------------------------------------------------------------------

def _surface_helper(module: ir.Module, kind: str, bits: int) -> ir.Function:
    """``iN ld(G base, i32 width, i32 height, i32 pitch, i32 x, i32 y, i1 in_block)`` returning
    the element at (x, y) or 0 when outside the block or the surface; ``st`` stores it unless
    outside.  x is in elements, width and pitch in bytes (signed coordinates, as on hardware).
    A base that is not 64-byte aligned (the specs require it) reads 0 and writes nothing, so a
    lowering that forgets to align it down gives wrong results under emulation too. (Width and
    pitch minimums are not enforced: the lowering's surface checks guard them on hardware.)"""
    name = f"__xejit_2d_{kind}{bits}"
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    ety = ir.IntType(bits)
    args = [GLOBAL, I32, I32, I32, I32, I32, I1] + ([ety] if kind == "st" else [])
    fn = ir.Function(module, ir.FunctionType(ety if kind == "ld" else VOID, args), name)
    fn.linkage = "internal"
    base, width, height, pitch, x, y, inblk = fn.args[:7]
    entry, do, done = (fn.append_basic_block(n) for n in ("entry", "inbounds", "done"))
    bld = ir.IRBuilder(entry)
    eb = bits // 8
    x64, y64 = bld.sext(x, I64), bld.sext(y, I64)
    xb = bld.mul(x64, I64(eb))
    ok = bld.and_(inblk, bld.icmp_signed(">=", x64, I64(0)))
    ok = bld.and_(ok, bld.icmp_signed(">=", y64, I64(0)))
    ok = bld.and_(ok, bld.icmp_signed("<=", bld.add(xb, I64(eb)), bld.zext(width, I64)))
    ok = bld.and_(ok, bld.icmp_signed("<", y64, bld.zext(height, I64)))
    aligned = bld.icmp_unsigned("==", bld.and_(bld.ptrtoint(base, I64), I64(63)), I64(0))
    ok = bld.and_(ok, aligned)
    bld.cbranch(ok, do, done)
    bld.position_at_end(do)
    off = bld.add(bld.mul(y64, bld.zext(pitch, I64)), xb)
    ptr = bld.gep(base, [off], source_etype=I8)
    if kind == "ld":
        val = bld.load(ptr, typ=ety, align=eb)
    else:
        bld.store(fn.args[7], ptr, align=eb)
    bld.branch(done)
    bld.position_at_end(done)
    if kind == "ld":
        phi = bld.phi(ety)
        phi.add_incoming(ety(0), entry)
        phi.add_incoming(val, do)
        bld.ret(phi)
    else:
        bld.ret_void()
    return fn


def _block_element(bld: ir.IRBuilder, v: BlockVariant, lane: ir.Value, k: ir.Value):
    """(row, col, blk) of per-lane element ``k`` (i32, a loop counter): row/col in the
    post-layout block (after transform/transpose), blk the block of the count, all i32."""
    _, cols = v.post_shape()
    per = v.per_block()
    blk, kk = bld.udiv(k, I32(per)), bld.urem(k, I32(per))
    if cols <= v.sg:
        rpg = v.sg // cols
        col = bld.urem(lane, I32(cols)) if cols < v.sg else lane
        row = bld.add(bld.mul(kk, I32(rpg)), bld.udiv(lane, I32(cols))) if rpg > 1 else kk
    elif v.kind == "load_transpose":
        # a transposed row wider than the subgroup fills cols / sg registers, one after the
        # other: word kk of a lane is column lane + sg * (kk % ept). This is what Intel's
        # compiler does (the send's destination registers are the words, read per lane);
        # the spec's prose ("the first set of elements to the first invocation") would put
        # columns 2 lane, 2 lane + 1 there, which the ISA does not
        # (test_intel_compiler.py::test_tall_transposed_load_words_are_the_sends_destination_registers).
        ept = cols // v.sg
        col = bld.add(lane, bld.mul(bld.urem(kk, I32(ept)), I32(v.sg)))
        row = bld.udiv(kk, I32(ept))
    else:
        ept = cols // v.sg
        col = bld.add(bld.mul(lane, I32(ept)), bld.urem(kk, I32(ept)))
        row = bld.udiv(kk, I32(ept))
    return row, col, blk


def _emu_block(fn: ir.Function, v: BlockVariant) -> None:
    """One loop over this lane's elements (not unrolled: the CPU driver's build time grows with
    the code, and a 32-row block is hundreds of elements per lane). (The elements cannot be
    passed by value instead of through the private pointer: up to 64 of them, vectors LLVM's
    SPIR-V backend cannot legalize.)"""
    entry = fn.append_basic_block("entry")
    bld = ir.IRBuilder(entry)
    if v.kind == "prefetch":      # prefetching "does not affect the functionality" (spec)
        bld.ret_void()
        return
    if v.kind == "store":
        src, base, width, height, pitch, coord = fn.args
    else:
        base, width, height, pitch, coord, dst = fn.args
    cx, cy = bld.extract_element(coord, I32(0)), bld.extract_element(coord, I32(1))
    lane = bi.sub_group_local_id(bld)
    ld = _surface_helper(fn.module, "ld", v.elem_bits)
    lty = ir.IntType(v.lane_bits)
    W, H = I32(v.width), I32(v.height)
    body, done = fn.append_basic_block("elem"), fn.append_basic_block("done")
    bld.branch(body)
    bld.position_at_end(body)
    k = bld.phi(I32, name="k")
    k.add_incoming(I32(0), entry)
    row, col, blk = _block_element(bld, v, lane, k)
    bx = bld.add(cx, bld.mul(blk, I32(v.width)))
    slot = bld.gep(dst if v.kind != "store" else src, [k], source_etype=lty)
    if v.kind == "load_transpose":
        # post (row, col) = pre (col, row): row indexes the pre-transpose column.
        inb = bld.and_(bld.icmp_unsigned("<", row, W), bld.icmp_unsigned("<", col, H))
        val = bi.call(bld, ld, [base, width, height, pitch, bld.add(bx, row), bld.add(cy, col), inb])
    elif v.kind == "load_transform":
        x = bld.add(bx, col)
        in_col = bld.icmp_unsigned("<", col, W)
        val = I32(0)
        for t in range(v.vnni):
            r = bld.add(bld.mul(row, I32(v.vnni)), I32(t))
            inb = bld.and_(in_col, bld.icmp_unsigned("<", r, H))
            e = bi.call(bld, ld, [base, width, height, pitch, x, bld.add(cy, r), inb])
            e = bld.zext(e, I32)
            val = bld.or_(val, bld.shl(e, I32(t * v.elem_bits)) if t else e)
    else:
        inb = bld.and_(bld.icmp_unsigned("<", row, H), bld.icmp_unsigned("<", col, W))
        x, y = bld.add(bx, col), bld.add(cy, row)
        if v.kind == "store":
            st = _surface_helper(fn.module, "st", v.elem_bits)
            bi.call(bld, st, [base, width, height, pitch, x, y, inb, bld.load(slot, typ=lty)])
            val = None
        else:
            val = bi.call(bld, ld, [base, width, height, pitch, x, y, inb])
    if val is not None:
        bld.store(val, slot)
    nxt = bld.add(k, I32(1))
    k.add_incoming(nxt, bld.block)
    bld.cbranch(bld.icmp_unsigned("<", nxt, I32(v.lane_elems())), body, done)
    bld.position_at_end(done)
    bld.ret_void()


# --------------------------------------------------------------------------------------------
# The table and the declare_* API
# --------------------------------------------------------------------------------------------

#: kind -> (real-builtin body, emulation body); each fills an empty ``ir.Function``.
IMPLEMENTATIONS: dict[str, tuple[Callable, Callable]] = {
    "dpas": (_real_dpas, _emu_dpas),
    "load": (_real_block, _emu_block),
    "load_transform": (_real_block, _emu_block),
    "load_transpose": (_real_block, _emu_block),
    "prefetch": (_real_block, _emu_block),
    "store": (_real_block, _emu_block),
}


def declare_variant(module: ir.Module, v: Variant, emulate: bool) -> ir.Function:
    """The function implementing variant ``v`` in ``module`` (defined once per module).

    A module is either emulated or not: asking for the other flavour of a variant that is
    already defined is an error.
    """
    fn = module.globals.get(v.name)
    if fn is not None:
        if getattr(fn, "_xejit_emulated", emulate) != emulate:
            raise ValueError(f"{v.name} is already defined with emulate={not emulate} in this module")
        return fn
    fn = ir.Function(module, v.function_type(), v.name)
    fn.linkage = "internal"
    fn._xejit_emulated = emulate
    real, emu = IMPLEMENTATIONS[v.kind]
    # Emulated bodies are loops; the DPAS, called from many sites, stays out of line so that the
    # CPU driver compiles it once. Block ops are inlined: out of line, the private pointer they
    # take crashed the CPU runtime at run time (tests/codegen/xegpu: pad_copy's store, GEMM loads)
    fn.attributes.add("noinline" if emulate and v.kind == "dpas" else "alwaysinline")
    (emu if emulate else real)(fn, v)
    return fn


def _sg(target: Target, subgroup_size: int | None) -> int:
    return subgroup_size or target.subgroup_size


def declare_dpas(module: ir.Module, target: Target, a_ty: str, b_ty: str, acc_ty: str, m: int,
                 emulate: bool = False, subgroup_size: int | None = None) -> ir.Function:
    """``C f(A, B, C)`` computing one DPAS of ``target`` (types: see :meth:`DpasVariant.types`)."""
    if target.dpas is None:
        raise ValueError(f"target {target.name!r} has no DPAS")
    why = target.dpas.supports(a_ty, b_ty, acc_ty, m)
    if why:
        raise ValueError(why)
    return declare_variant(module, DpasVariant(_sg(target, subgroup_size), a_ty, b_ty, acc_ty, m), emulate)


def _block(module, target, kind, elem_bits, width, height, count, emulate, subgroup_size):
    why = check_block_shape(target, elem_bits, width, height, count, op=kind)
    if why:
        raise ValueError(why)
    v = BlockVariant(kind, _sg(target, subgroup_size), elem_bits, width, height, count)
    return declare_variant(module, v, emulate)


def declare_block_load(module: ir.Module, target: Target, elem_bits: int, width: int, height: int,
                       count: int = 1, transform: bool = False, transpose: bool = False,
                       emulate: bool = False, subgroup_size: int | None = None) -> ir.Function:
    """``void f(G base, i32 width_bytes, i32 height, i32 pitch_bytes, <2 x i32> xy, P dst)``.

    ``dst`` receives :meth:`BlockVariant.lane_elems` values of ``lane_bits`` bits (the
    per-invocation layout of SPV_INTEL_2d_block_io); out-of-bounds elements read as 0.
    """
    if transform and transpose:
        raise ValueError("a 2D block load cannot both transform and transpose")
    kind = "load_transform" if transform else "load_transpose" if transpose else "load"
    return _block(module, target, kind, elem_bits, width, height, count, emulate, subgroup_size)


def declare_block_store(module: ir.Module, target: Target, elem_bits: int, width: int, height: int,
                        count: int = 1, emulate: bool = False,
                        subgroup_size: int | None = None) -> ir.Function:
    """``void f(P src, G base, i32 width_bytes, i32 height, i32 pitch_bytes, <2 x i32> xy)``;
    out-of-bounds elements are dropped."""
    return _block(module, target, "store", elem_bits, width, height, count, emulate, subgroup_size)


def declare_block_prefetch(module: ir.Module, target: Target, elem_bits: int, width: int, height: int,
                           count: int = 1, emulate: bool = False,
                           subgroup_size: int | None = None) -> ir.Function:
    """``void f(G base, i32 width_bytes, i32 height, i32 pitch_bytes, <2 x i32> xy)``; a no-op
    when emulated."""
    return _block(module, target, "prefetch", elem_bits, width, height, count, emulate, subgroup_size)


def inline_or_outlined(bld: ir.IRBuilder, name: str, ret: ir.Type, args: list, body: Callable,
                       outline: bool) -> ir.Value:
    """``body(builder, *args)``'s value (of type ``ret``): emitted here, or with ``outline``
    (emulation) once per module as the ``noinline`` function ``name`` and called here.

    The CPU driver's -O0 build of an emulated kernel takes about as long as the code it is
    given, so straight-line helpers repeated at many sites (a cold k-loop version's per-element
    row reads, the 8x8 transposes of C) are compiled once out of line; GPU targets keep them
    inline, the code Intel's compiler sees unchanged. ``body`` may use only its arguments, and
    ``name`` must tell apart every body a module asks for.
    """
    if not outline:
        return body(bld, *args)
    fn = bld.module.globals.get(name)
    ftype = ir.FunctionType(ret, [a.type for a in args])
    if fn is not None and fn.function_type != ftype:
        # two bodies under one name: the name must say what the body depends on
        raise AssertionError(f"helper {name} emitted as {fn.function_type}, asked for as {ftype}")
    if fn is None:
        fn = ir.Function(bld.module, ftype, name)
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        fbld = ir.IRBuilder(fn.append_basic_block("entry"))
        fbld.ret(body(fbld, *fn.args))
    return bld.call(fn, args)
