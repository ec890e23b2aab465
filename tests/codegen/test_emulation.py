"""Emulated DPAS and 2D block IO, run on the OpenCL CPU device against numpy models of the specs.

The numpy models below are written from the specs' text ("Mapping Matrix Data to Invocations" of
SPV_INTEL_subgroup_matrix_multiply_accumulate, "Mapping Block Data to Invocations" and
"Out-of-Bounds Behavior" of SPV_INTEL_2d_block_io), not from the emulation code.  Inputs are
random and non-zero; per-lane outputs and untouched memory are poisoned.
"""
from __future__ import annotations

import zlib
import sys
import textwrap

import numpy as np
import pytest
from llvmlite import ir

from xejit.codegen import builtins as bi
from xejit.codegen.emulation import (BlockVariant, DpasVariant, declare_block_load, declare_block_prefetch,
                                     declare_block_store, declare_dpas, declare_variant, emulated_name,
                                     real_builtin_name)

from xejit.codegen.spirv import to_spirv, validate
from xejit.codegen.targets import get_target

EMU_EXT = get_target("generic").spirv_extensions
POISON = 0xA5


@pytest.fixture(scope="module")
def runtime():
    from xejit.runtime import build_program, default_device
    default_device()  # no device is a failure here, not a skip
    return build_program


def _spv(m: ir.Module) -> bytes:
    """Emit and spirv-val every module."""
    spv = to_spirv(m, EMU_EXT)
    validate(spv)
    return spv


def _np_of(ty: ir.Type):
    el = ty.element if isinstance(ty, ir.VectorType) else ty
    n = ty.count if isinstance(ty, ir.VectorType) else 1
    if isinstance(el, ir.FloatType):
        return np.float32, n
    return {8: np.uint8, 16: np.uint16, 32: np.uint32}[el.width], n


# ---------------------------------------------------------------------------------------------
# DPAS
# ---------------------------------------------------------------------------------------------

def _dpas_kernel(fn_factory, sg):
    m = bi.new_module("dpas")
    k = bi.kernel(m, "k", [bi.GLOBAL] * 4, subgroup_size=sg)
    f = fn_factory(m)
    A, B, C = f.function_type.args
    b = ir.IRBuilder(k.append_basic_block())
    lane = bi.sub_group_local_id(b)
    ops = [b.load(b.gep(k.args[i], [lane], source_etype=t), typ=t) for i, t in enumerate((A, B, C))]
    b.store(bi.call(b, f, ops), b.gep(k.args[3], [lane], source_etype=C))
    b.ret_void()
    return m, f


def _rand_operand(rng, ty, shape):
    """(bits as unsigned ints, float64 values) of random non-zero elements of ``ty``."""
    if ty == "bf16":
        x = (rng.uniform(0.5, 2.0, shape) * rng.choice([-1, 1], shape)).astype(np.float32)
        bits = (x.view(np.uint32) >> 16).astype(np.uint16)
        return bits, (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if ty == "fp16":
        x = (rng.uniform(0.5, 2.0, shape) * rng.choice([-1, 1], shape)).astype(np.float16)
        return x.view(np.uint16), x.astype(np.float64)
    if ty == "tf32":
        x = (rng.uniform(0.5, 2.0, shape) * rng.choice([-1, 1], shape)).astype(np.float32)
        bits = x.view(np.uint32) & np.uint32(0xFFFFE000)
        return bits, bits.view(np.float32).astype(np.float64)
    if ty == "int8":
        x = rng.integers(-128, 128, shape)
        x[x == 0] = 7
        return x.astype(np.int8).view(np.uint8), x.astype(np.float64)
    if ty == "uint8":
        x = rng.integers(1, 256, shape)
        return x.astype(np.uint8), x.astype(np.float64)
    raise AssertionError(ty)


def _pack_a(bits, sg, eb, K, M, rng):
    """Per-lane A operand (spec: lower lanes pass lower columns; three cases on N vs K)."""
    if sg <= K:                       # cases 1 and 2: p columns per lane, low column in low bits
        p = K // sg
        out = np.zeros((sg, M), np.uint64)
        for lane in range(sg):
            for t in range(p):
                out[lane] |= bits[:, lane * p + t].astype(np.uint64) << np.uint64(t * eb)
        return out
    r = sg // K                       # case 3: lane l has column l % K, rows i*r + l // K
    n = -(-M // r)
    out = rng.integers(1, 2**eb, (sg, n)).astype(np.uint64)   # rows beyond M: ignored garbage
    for lane in range(sg):
        for i in range(n):
            row = i * r + lane // K
            if row < M:
                out[lane, i] = bits[row, lane % K]
    return out


def _pack_b(bits, sg, eb, K):
    """Per-lane B operand: one column per lane; <=16-bit rows packed in 32 bits, low row low."""
    if eb == 32:
        return bits.T.copy()
    per = 32 // eb
    out = np.zeros((sg, K // per), np.uint64)
    for j in range(K // per):
        for t in range(per):
            out[:, j] |= bits[j * per + t, :].astype(np.uint64) << np.uint64(t * eb)
    return out


DPAS_CASES = [("pvc", t, m) for t in ("bf16", "fp16", "tf32", "int8") for m in (8, 1)] + \
    [("pvc", "bf16", 2), ("pvc", "tf32", 2), ("pvc", "tf32", 4), ("pvc", "uint8", 4)] + \
    [("dg2", t, m) for t in ("bf16", "fp16", "int8") for m in (8, 1)] + [("dg2", "uint8", 2)]


@pytest.mark.parametrize("tname,ty,M", DPAS_CASES)
def test_dpas(runtime, tname, ty, M):
    target = get_target(tname)
    sg = target.subgroup_size
    acc = "i32" if "int" in ty else "f32"
    m, f = _dpas_kernel(lambda mod: declare_dpas(mod, target, ty, ty, acc, M, emulate=True), sg)
    v = DpasVariant(sg, ty, ty, acc, M)
    K, eb = v.k, v.elem_bits
    rng = np.random.default_rng(zlib.crc32(repr((tname, ty, M)).encode()))
    a_bits, a = _rand_operand(rng, ty, (M, K))
    b_bits, b = _rand_operand(rng, ty, (K, sg))
    if acc == "f32":
        c = rng.uniform(-4, 4, (M, sg)).astype(np.float32)
    else:
        c = rng.integers(-1000, 1000, (M, sg)).astype(np.int32)
    A, B, C = f.function_type.args
    (adt, an), (bdt, bn), (cdt, cn) = _np_of(A), _np_of(B), _np_of(C)
    a_lanes = _pack_a(a_bits, sg, eb, K, M, rng)
    if adt is np.float32:
        a_lanes = a_lanes.astype(np.uint32).view(np.float32)
    a_lanes = np.ascontiguousarray(a_lanes.astype(adt) if adt is not np.float32 else a_lanes)
    b_lanes = _pack_b(b_bits, sg, eb, K)
    b_lanes = b_lanes.astype(np.uint32).view(np.float32) if bdt is np.float32 else b_lanes.astype(bdt)
    assert a_lanes.shape == (sg, an) and b_lanes.shape == (sg, bn)
    c_lanes = np.ascontiguousarray(c.T)
    d_lanes = np.full((sg, cn), -7777, dtype=c.dtype)        # poisoned result
    kern = runtime(_spv(m)).kernel("k", ["ptr_in", "ptr_in", "ptr_in", "ptr"])
    kern.launch([1], [sg], np.ascontiguousarray(a_lanes), np.ascontiguousarray(b_lanes), c_lanes, d_lanes)
    got = d_lanes.T.astype(np.float64)
    ref = a @ b + c.astype(np.float64)
    if acc == "i32":
        np.testing.assert_array_equal(got, ref)
    else:
        tol = {"bf16": 1e-2, "fp16": 1e-2, "tf32": 1e-3}[ty]
        scale = np.abs(a) @ np.abs(b) + np.abs(c)
        assert np.all(np.abs(got - ref) <= tol * scale), np.max(np.abs(got - ref) / scale)


def test_dpas_rejects_unsupported():
    m = bi.new_module("x")
    with pytest.raises(ValueError, match="tf32"):
        declare_dpas(m, get_target("dg2"), "tf32", "tf32", "f32", 8, emulate=True)
    with pytest.raises(ValueError, match="no DPAS"):
        declare_dpas(m, get_target("generic"), "bf16", "bf16", "f32", 8, emulate=True)
    with pytest.raises(ValueError, match="repeat count"):
        declare_dpas(m, get_target("pvc"), "bf16", "bf16", "f32", 3, emulate=True)


# ---------------------------------------------------------------------------------------------
# 2D block IO: numpy model
# ---------------------------------------------------------------------------------------------

def _p2(x):
    return 1 << (x - 1).bit_length()


def _dtype(bits):
    return {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[bits]


def _block_region(mem, eb, x0, y0, W, H, width, height):
    """H x W elements at (x0, y0) of a surface; out-of-bounds elements read as 0."""
    pitch = mem.shape[1]
    elems = mem.view(_dtype(eb)).reshape(mem.shape[0], pitch * 8 // eb)
    out = np.zeros((H, W), _dtype(eb))
    for r in range(H):
        for c in range(W):
            x, y = x0 + c, y0 + r
            if 0 <= x and (x + 1) * eb // 8 <= width and 0 <= y < height:
                out[r, c] = elems[y, x]
    return out


def _distribute(post, sg, transposed=False):
    """Rows of a (padded) block to lanes (spec: three cases on padded width vs subgroup size);
    returns (sg, n) values and a mask of the defined ones. A transposed row wider than the
    subgroup fills cols / sg registers one after the other (lane l: columns l, l + sg, ...), as
    Intel's compiler reads the send's destination registers, not the spec's consecutive
    columns per lane."""
    rows, cols = post.shape
    if transposed and cols > sg:
        ept = cols // sg
        vals = post.reshape(rows, ept, sg).transpose(2, 0, 1).reshape(sg, rows * ept)
        return vals, np.ones(vals.shape, bool)
    if cols <= sg:
        rpg = sg // cols
        n = -(-rows // rpg)
        vals = np.zeros((sg, n), post.dtype)
        defined = np.zeros((sg, n), bool)
        for lane in range(sg):
            for i in range(n):
                r = i * rpg + lane // cols
                if r < rows:
                    vals[lane, i], defined[lane, i] = post[r, lane % cols], True
        return vals, defined
    ept = cols // sg
    vals = post.reshape(rows, sg, ept).transpose(1, 0, 2).reshape(sg, rows * ept)
    return vals, np.ones(vals.shape, bool)


def _model_load(kind, mem, sg, eb, W, H, count, width, height, x0, y0):
    outs, masks = [], []
    for blk in range(count):
        region = _block_region(mem, eb, x0 + blk * W, y0, W, H, width, height)
        if kind == "load":
            post = np.zeros((H, _p2(W)), region.dtype)
            post[:, :W] = region
        elif kind == "load_transform":
            v = 32 // eb
            hp = -(-H // v) * v
            padded = np.zeros((hp, _p2(W)), np.uint32)
            padded[:H, :W] = region
            post = np.zeros((hp // v, _p2(W)), np.uint32)
            for t in range(v):
                post |= padded[t::v] << np.uint32(t * eb)
        else:  # transpose: block height padded to a power of two, then transposed
            padded = np.zeros((_p2(H), W), region.dtype)
            padded[:H] = region
            post = padded.T.copy()
        vals, defined = _distribute(post, sg, kind == "load_transpose")
        outs.append(vals)
        masks.append(defined)
    return np.concatenate(outs, axis=1), np.concatenate(masks, axis=1)


def _surface(rng, pitch, rows):
    """Random non-zero bytes: the memory beyond width / height is non-zero too, so an
    emulation that reads out of bounds instead of returning 0 is caught."""
    return rng.integers(1, 256, (rows, pitch)).astype(np.uint8)


# ---------------------------------------------------------------------------------------------
# 2D block IO: kernels
# ---------------------------------------------------------------------------------------------

def _load_kernel(v: BlockVariant, emulate=True):
    m = bi.new_module("blk")
    k = bi.kernel(m, "k", [bi.GLOBAL] * 3, subgroup_size=v.sg)
    f = declare_variant(m, v, emulate=emulate)
    b = ir.IRBuilder(k.append_basic_block())
    lane = bi.sub_group_local_id(b)
    n, lty = v.lane_elems(), ir.IntType(v.lane_bits)
    arr = ir.ArrayType(lty, n)
    dst = b.alloca(arr)
    b.store(ir.Constant(arr, [lty(int.from_bytes([POISON] * (v.lane_bits // 8), "little"))] * n), dst)
    p = [b.load(b.gep(k.args[2], [bi.I32(i)], source_etype=bi.I32), typ=bi.I32) for i in range(5)]
    coord = b.insert_element(b.insert_element(ir.Constant(ir.VectorType(bi.I32, 2), None), p[3], bi.I32(0)),
                             p[4], bi.I32(1))
    bi.call(b, f, [k.args[0], p[0], p[1], p[2], coord, dst])
    b.store(b.load(dst, typ=arr), b.gep(k.args[1], [lane], source_etype=arr))
    b.ret_void()
    return m


def _run_load(runtime, v, mem, width, height, x0, y0):
    out = np.full((v.sg, v.lane_elems()), 0x5A, _dtype(v.lane_bits))
    params = np.array([width, height, mem.shape[1], x0, y0], np.int32)
    kern = runtime(_spv(_load_kernel(v))).kernel("k", ["ptr_in", "ptr", "ptr_in"])
    kern.launch([1], [v.sg], mem, out, params)
    return out


LOAD_CASES = [
    # kind, elem bits, width, height, count, x0, y0 (in elements / rows)
    ("load", 16, 16, 8, 1, 2, 1),
    ("load", 16, 16, 32, 1, 0, 0),
    ("load", 16, 16, 8, 2, 4, 3),
    ("load", 16, 16, 32, 2, 2, 0),
    ("load", 8, 32, 8, 2, 4, 2),       # two 8-bit elements per lane per row
    ("load", 32, 8, 8, 2, 1, 1),       # width 8 < 16 lanes: two rows per subgroup row
    ("load_transform", 16, 16, 16, 1, 2, 1),
    ("load_transform", 16, 16, 32, 2, 0, 2),
    ("load_transform", 8, 16, 32, 1, 4, 1),
    ("load_transform", 8, 16, 32, 4, 0, 0),
    ("load_transpose", 32, 8, 16, 1, 1, 2),
    ("load_transpose", 32, 8, 32, 1, 0, 0),    # 32 rows: two registers per transposed row
    ("load_transpose", 32, 4, 32, 1, 3, 5),
]


@pytest.mark.parametrize("kind,eb,W,H,count,x0,y0", LOAD_CASES)
def test_block_load(runtime, kind, eb, W, H, count, x0, y0):
    target = get_target("pvc")
    m = bi.new_module("api")   # the public entry point accepts the shape
    declare_block_load(m, target, eb, W, H, count, transform=kind == "load_transform",
                       transpose=kind == "load_transpose", emulate=True)
    v = BlockVariant(kind, 16, eb, W, H, count)
    rng = np.random.default_rng(W * 1000 + H * 10 + count + eb)
    pitch, rows = 256, 48
    width = 192                      # bytes; the surface is narrower than its pitch
    height = 40
    mem = _surface(rng, pitch, rows)
    got = _run_load(runtime, v, mem, width, height, x0, y0)
    want, defined = _model_load(kind, mem, 16, eb, W, H, count, width, height, x0, y0)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got[defined], want[defined])


@pytest.mark.parametrize("kind,eb,W,H,count", [
    ("load", 16, 16, 8, 2), ("load", 32, 16, 8, 1), ("load_transform", 16, 16, 32, 1),
    ("load_transform", 8, 16, 32, 2), ("load_transpose", 32, 8, 16, 1), ("load", 8, 32, 8, 1),
    ("load_transpose", 32, 8, 32, 1),
])
@pytest.mark.parametrize("edge", ["right", "bottom", "corner", "outside", "negative"])
def test_block_load_boundary(runtime, kind, eb, W, H, count, edge):
    """Blocks hanging over the right / bottom edges (and wholly outside) read zeros there."""
    v = BlockVariant(kind, 16, eb, W, H, count)
    rng = np.random.default_rng(zlib.crc32(repr((kind, eb, W, H, count, edge)).encode()))
    pitch, rows = 256, 80
    width, height = 128, 40          # bytes, rows
    wel = width * 8 // eb
    x0, y0 = {"right": (wel - W // 2, 4), "bottom": (0, height - H // 2 - 1),
              "corner": (wel - (W * count) // 2 - (4 if eb == 8 else 2), height - 3),
              "outside": (wel + W, 2), "negative": (-W, -2)}[edge]
    if eb == 8:
        x0 -= x0 % 4
    elif eb == 16:
        x0 -= x0 % 2
    mem = _surface(rng, pitch, rows)
    got = _run_load(runtime, v, mem, width, height, x0, y0)
    want, defined = _model_load(kind, mem, 16, eb, W, H, count, width, height, x0, y0)
    np.testing.assert_array_equal(got[defined], want[defined])
    assert (want[defined] == 0).any()  # the case really crosses an edge


@pytest.mark.parametrize("eb,lanes_bits,W,H,kind,expected", [
    # The spec's examples (SPV_INTEL_2d_block_io "Mapping Block Data to Invocations"), subgroup size 4;
    # element "r,c" is stored as r * 16 + c.  expected[lane] lists the per-lane values in order.
    (32, 32, 4, 2, "load", [[0x00, 0x10], [0x01, 0x11], [0x02, 0x12], [0x03, 0x13]]),
    (32, 32, 2, 4, "load", [[0x00, 0x20], [0x01, 0x21], [0x10, 0x30], [0x11, 0x31]]),
    (32, 32, 8, 2, "load", [[0x00, 0x01, 0x10, 0x11], [0x02, 0x03, 0x12, 0x13],
                            [0x04, 0x05, 0x14, 0x15], [0x06, 0x07, 0x16, 0x17]]),
    (32, 32, 2, 4, "load_transpose", [[0x00, 0x01], [0x10, 0x11], [0x20, 0x21], [0x30, 0x31]]),
    (16, 32, 4, 2, "load_transform", [[(0x10 + c) << 16 | c] for c in range(4)]),
    (8, 32, 4, 4, "load_transform", [[0x30201000], [0x31211101], [0x32221202], [0x33231303]]),
])
def test_spec_examples_subgroup_4(runtime, eb, lanes_bits, W, H, kind, expected):
    v = BlockVariant(kind, 4, eb, W, H, 1)
    pitch = 64
    mem8 = np.zeros((8, pitch), np.uint8)
    el = mem8.view(_dtype(eb)).reshape(8, pitch * 8 // eb)
    for r in range(8):
        for c in range(el.shape[1]):
            el[r, c] = (r * 16 + c) & ((1 << eb) - 1)
    got = _run_load(runtime, v, mem8, pitch, 8, 0, 0)
    np.testing.assert_array_equal(got, np.array(expected, _dtype(lanes_bits)))


# ---------------------------------------------------------------------------------------------
# 2D block store and prefetch
# ---------------------------------------------------------------------------------------------

def _store_kernel(v: BlockVariant):
    m = bi.new_module("st")
    k = bi.kernel(m, "k", [bi.GLOBAL] * 3, subgroup_size=v.sg)
    f = declare_variant(m, v, emulate=True)
    pf = declare_variant(m, BlockVariant("prefetch", v.sg, v.elem_bits, v.width, v.height, v.count), emulate=True)
    b = ir.IRBuilder(k.append_basic_block())
    lane = bi.sub_group_local_id(b)
    arr = ir.ArrayType(ir.IntType(v.lane_bits), v.lane_elems())
    src = b.alloca(arr)
    b.store(b.load(b.gep(k.args[0], [lane], source_etype=arr), typ=arr), src)
    p = [b.load(b.gep(k.args[2], [bi.I32(i)], source_etype=bi.I32), typ=bi.I32) for i in range(5)]
    coord = b.insert_element(b.insert_element(ir.Constant(ir.VectorType(bi.I32, 2), None), p[3], bi.I32(0)),
                             p[4], bi.I32(1))
    bi.call(b, pf, [k.args[1], p[0], p[1], p[2], coord])
    bi.call(b, f, [src, k.args[1], p[0], p[1], p[2], coord])
    b.ret_void()
    return m


@pytest.mark.parametrize("eb,W,H,edge", [
    (32, 16, 8, "inside"), (32, 16, 8, "right"), (32, 16, 8, "bottom"), (32, 16, 8, "corner"),
    (16, 16, 8, "inside"), (16, 16, 8, "corner"), (8, 32, 4, "right"), (32, 8, 8, "inside"),
])
def test_block_store(runtime, eb, W, H, edge):
    v = BlockVariant("store", 16, eb, W, H, 1)
    target = get_target("pvc")
    declare_block_store(bi.new_module("api"), target, eb, W, H, emulate=True)
    declare_block_prefetch(bi.new_module("api"), target, eb, W, H, emulate=True)
    rng = np.random.default_rng(eb * 100 + W + H)
    pitch, rows, width, height = 256, 24, 128, 16
    wel = width * 8 // eb
    x0, y0 = {"inside": (4 if eb == 8 else 2, 3), "right": (wel - W // 2, 1), "bottom": (0, height - H // 2),
              "corner": (wel - W // 2, height - 3)}[edge]
    mem = _surface(rng, pitch, rows)
    before = mem.copy()
    n = v.lane_elems()
    vals = rng.integers(1, 2**eb - 1, (16, n), dtype=np.uint64).astype(_dtype(eb))
    params = np.array([width, height, pitch, x0, y0], np.int32)
    runtime(_spv(_store_kernel(v))).kernel("k", ["ptr_in", "ptr", "ptr_in"]).launch([1], [16], vals, mem, params)
    # model: the per-lane values form the block (same distribution as a load); in-bounds ones land
    want = before.copy()
    el = want.view(_dtype(eb)).reshape(rows, pitch * 8 // eb)
    cols = _p2(W)
    for lane in range(16):
        for i in range(n):
            if cols <= 16:
                r, c = i * (16 // cols) + lane // cols, lane % cols
            else:
                ept = cols // 16
                r, c = i // ept, lane * ept + i % ept
            x, y = x0 + c, y0 + r
            if r < H and c < W and 0 <= x and (x + 1) * eb // 8 <= width and 0 <= y < height:
                el[y, x] = vals[lane, i]
    np.testing.assert_array_equal(mem, want)
    assert not np.array_equal(mem, before)


# ---------------------------------------------------------------------------------------------
# Names, the table, and the real builtins (validated only: they cannot run here)
# ---------------------------------------------------------------------------------------------

def test_names_and_mangling():
    assert emulated_name("dpas", sg=16, a_ty="bf16", b_ty="bf16", acc_ty="f32", m=8) == \
        "__xejit_dpas_sg16_bf16_bf16_f32_m8"
    assert emulated_name("load_transform", sg=16, elem_bits=16, width=16, height=16, count=2) == \
        "__xejit_2d_load_transform_sg16_e16_w16_h16_c2"
    assert real_builtin_name(DpasVariant(16, "bf16", "bf16", "f32", 8)) == \
        "_Z45__spirv_SubgroupMatrixMultiplyAccumulateINTELiDv8_sDv8_iDv8_fi"
    assert real_builtin_name(DpasVariant(8, "int8", "int8", "i32", 8)) == \
        "_Z45__spirv_SubgroupMatrixMultiplyAccumulateINTELiDv8_iS_S_i"
    assert real_builtin_name(DpasVariant(16, "tf32", "tf32", "f32", 1)) == \
        "_Z45__spirv_SubgroupMatrixMultiplyAccumulateINTELifDv8_ffi"
    assert BlockVariant("load_transform", 16, 8, 16, 32, 4).lane_elems() == 32
    assert BlockVariant("load_transpose", 16, 32, 8, 32, 1).lane_elems() == 16
    assert BlockVariant("load", 16, 32, 8, 1, 1).lane_elems() == 1
    m = bi.new_module("x")
    f = declare_block_load(m, get_target("pvc"), 16, 16, 8, emulate=True)
    assert declare_block_load(m, get_target("pvc"), 16, 16, 8, emulate=True) is f
    with pytest.raises(ValueError, match="emulate"):
        declare_block_load(m, get_target("pvc"), 16, 16, 8, emulate=False)
    with pytest.raises(ValueError, match="exceeds 64"):
        declare_block_load(m, get_target("pvc"), 16, 32, 8, 2, emulate=True)


_REAL_SCRIPT = textwrap.dedent("""
    import re, sys
    from llvmlite import ir
    from xejit.codegen import builtins as bi
    from xejit.codegen.emulation import *
    from xejit.codegen.spirv import to_spirv, validate, disassemble
    from xejit.codegen.targets import get_target
    t = get_target(sys.argv[1])
    m = bi.new_module("real")
    k = bi.kernel(m, "k", [bi.GLOBAL] * 2, subgroup_size=t.subgroup_size)
    b = ir.IRBuilder(k.append_basic_block())
    for ty in t.dpas.types:
        for M in t.dpas.repeat_counts:
            f = declare_dpas(m, t, ty, ty, "i32" if "int" in ty else "f32", M, emulate=False)
            A, B, C = f.function_type.args
            ops = [b.load(b.gep(k.args[0], [bi.I32(i)], source_etype=x), typ=x) for i, x in enumerate((A, B, C))]
            b.store(bi.call(b, f, ops), b.gep(k.args[1], [bi.I32(0)], source_etype=C))
    if t.block_io is not None:
        coord = ir.Constant(ir.VectorType(bi.I32, 2), [bi.I32(0), bi.I32(0)])
        surf = [k.args[0], bi.I32(256), bi.I32(64), bi.I32(256), coord]
        for kind, eb, w, h, c in [("load", 16, 16, 8, 2), ("load", 8, 32, 32, 2), ("load_transform", 16, 16, 32, 2),
                                  ("load_transform", 8, 16, 32, 4), ("load_transpose", 32, 8, 16, 1),
                                  ("store", 32, 16, 8, 1), ("prefetch", 16, 16, 32, 2)]:
            v = BlockVariant(kind, t.subgroup_size, eb, w, h, c)
            f = declare_variant(m, v, emulate=False)
            arr = ir.ArrayType(ir.IntType(v.lane_bits), max(1, v.lane_elems()))
            buf = b.alloca(arr)
            bi.call(b, f, [buf] + surf if kind == "store" else surf if kind == "prefetch" else surf + [buf])
            b.store(b.load(buf, typ=arr), b.gep(k.args[1], [bi.I32(0)], source_etype=arr))
    b.ret_void()
    spv = to_spirv(m, t.spirv_extensions)
    validate(spv)
    d = disassemble(spv)
    print(sorted(set(re.findall(r"OpSubgroup\\w+INTEL", d))))
""")


@pytest.mark.parametrize("tname", ["pvc", "dg2"])
def test_real_builtins_pass_spirv_val(tname, capsys, monkeypatch):
    """Modules calling the real builtins (emulate=False) validate (they cannot run here)."""
    monkeypatch.setattr(sys, "argv", ["real", tname])
    exec(compile(_REAL_SCRIPT, "<real builtins>", "exec"), {})
    ops = capsys.readouterr().out
    assert "OpSubgroupMatrixMultiplyAccumulateINTEL" in ops
    if tname == "pvc":
        for op in ("OpSubgroup2DBlockLoadINTEL", "OpSubgroup2DBlockLoadTransformINTEL",
                   "OpSubgroup2DBlockLoadTransposeINTEL", "OpSubgroup2DBlockStoreINTEL",
                   "OpSubgroup2DBlockPrefetchINTEL"):
            assert op in ops


def test_an_outlined_helper_is_one_body_a_name():
    """``inline_or_outlined`` emits a helper once per module and calls it at every use; asked for
    under the same name with another signature (a name that does not say what the body depends
    on) it raises instead of calling the first body."""
    from xejit.codegen.emulation import inline_or_outlined

    mod = ir.Module()
    f32, i32 = ir.FloatType(), ir.IntType(32)
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [f32, i32]), "k")
    b = ir.IRBuilder(fn.append_basic_block())

    def twice(bb: ir.IRBuilder, x: ir.Value) -> ir.Value:
        return bb.fadd(x, x)

    for _ in range(3):
        inline_or_outlined(b, "__xejit_twice", f32, [fn.args[0]], twice, True)
    assert len([g for g in mod.globals if g == "__xejit_twice"]) == 1
    assert str(mod).count('call float @"__xejit_twice"') == 3, str(mod)
    with pytest.raises(AssertionError, match="__xejit_twice"):
        inline_or_outlined(b, "__xejit_twice", i32, [fn.args[1]], lambda bb, x: bb.add(x, x), True)
    # not outlined (GPU targets): the body is emitted at the call site
    v = inline_or_outlined(b, "__xejit_twice", i32, [fn.args[1]], lambda bb, x: bb.add(x, x), False)
    assert isinstance(v, ir.Instruction) and v.opname == "add"
