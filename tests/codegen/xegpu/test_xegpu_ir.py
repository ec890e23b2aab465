"""XeGPU dialect: numpy semantics against hand-computed expectations, verifiers, target checks,
printing."""
from __future__ import annotations

import numpy as np
import pytest

from xejit.codegen.targets import check_block_shape, get_target
from xejit.ir import Buffer, Interpreter, print_function
from xejit.ir.core import ArrayType, Builder, Function, VectorType, VerifyError, bf16, f16, f32, i1, i8, i32, index
from xejit.ir.verifier import verify_function
from xejit.ir.xegpu import TensorDescType, load_result_types, verify_for_target, vnni_pack, vnni_unpack


def _fn(arr_types, build):
    """A function over arrays whose body ``build(b, args)`` returns values to store into
    extra output arrays (one f32/i32 2D array per value)."""
    fn = Function("k", arr_types, [f"a{i}" for i in range(len(arr_types))])
    b = Builder.at_end(fn.entry)
    build(b, fn.args)
    b.create("func.return")
    verify_function(fn)
    return fn


def _idx(b, v):
    return b.create("arith.constant", [], [index], {"value": v}).result


def _run(fn, arrays, dtypes):
    Interpreter().run_grid(fn, (1,), [Buffer(a, t) for a, t in zip(arrays, dtypes)])


class Capture:
    """Record the values of the results of ops as they are interpreted."""

    def __init__(self):
        from xejit.ir.interpreter import IMPLS
        self.IMPLS = IMPLS
        self.values = {}

    def run(self, fn, args, names):
        orig = dict(self.IMPLS)
        try:
            for name in names:
                rule = orig[name]

                def wrap(it, op, a, rule=rule):
                    out = rule(it, op, a)
                    self.values.setdefault(op.name, []).append(out)
                    return out
                self.IMPLS[name] = wrap
            Interpreter().run_grid(fn, (1,), args)
        finally:
            self.IMPLS.clear()
            self.IMPLS.update(orig)
        return self.values


def _load_values(mem, dtype, shape, offsets, array_length=1, padding=0, **attrs):
    """The results of one load_nd on ``mem`` (a 2D numpy array)."""
    def build(b, args):
        t = TensorDescType(shape, dtype, array_length=array_length)
        d = b.create("xegpu.create_nd_tdesc", [args[0], _idx(b, offsets[0]), _idx(b, offsets[1])], [t]).result
        a = dict(attrs)
        if padding:
            a["padding"] = padding
        tys = load_result_types(t, attrs.get("packed", False), attrs.get("transpose") is not None,
                                attrs.get("transpose_bit_width"), attrs.get("transpose_blocks", 1))
        b.create("xegpu.load_nd", [d], tys, a)
    order = (0, 1) if mem.flags.f_contiguous and not mem.flags.c_contiguous else (1, 0)
    fn = _fn([ArrayType(dtype, 2, order)], build)
    vals = Capture().run(fn, [Buffer(mem, dtype)], ["xegpu.load_nd"])
    return vals["xegpu.load_nd"][0]


def test_vnni_pack_by_hand():
    x = np.arange(8, dtype=np.float32).reshape(4, 2)      # rows r0..r3 of 2 columns
    p = vnni_pack(x, 2)
    assert p.shape == (2, 2, 2)
    # packed[i, n] = (x[2i, n], x[2i+1, n]): lower row in the lower half
    assert p[0, 0].tolist() == [0, 2] and p[0, 1].tolist() == [1, 3] and p[1, 0].tolist() == [4, 6]
    np.testing.assert_array_equal(vnni_unpack(p), x)
    q = vnni_pack(np.arange(16).reshape(8, 2), 4)           # int8: four rows per 32-bit value
    assert q[1, 1].tolist() == [9, 11, 13, 15]


def test_load_nd_plain_and_oob_padding():
    mem = np.arange(1, 6 * 10 + 1, dtype=np.float32).reshape(6, 10)
    (blk,) = _load_values(mem, f32, (4, 8), (4, 6))
    want = np.zeros((4, 8), np.float32)
    want[:2, :4] = mem[4:6, 6:10]             # rows 6.., cols 10.. are outside: zero
    np.testing.assert_array_equal(blk, want)
    (blk,) = _load_values(mem, f32, (4, 8), (-2, -1), padding=-7.0)
    want = np.full((4, 8), -7.0, np.float32)
    want[2:, 1:] = mem[0:2, 0:7]
    np.testing.assert_array_equal(blk, want)


def test_load_nd_array_length_blocks_side_by_side():
    mem = np.arange(8 * 40, dtype=np.float32).reshape(8, 40)
    b0, b1 = _load_values(mem, f32, (8, 16), (0, 8), array_length=2)
    np.testing.assert_array_equal(b0, mem[:, 8:24])
    want = np.zeros((8, 16), np.float32)
    want[:, :16] = mem[:, 24:40]
    np.testing.assert_array_equal(b1, want)


def test_load_nd_packed_vnni_bf16_and_int8():
    mem = (np.arange(16 * 16, dtype=np.float32).reshape(16, 16) / 4).astype(np.float32)
    from xejit.ir.core import f32_to_bf16_bits
    bits = f32_to_bf16_bits(mem)
    (p,) = _load_values(bits, bf16, (16, 16), (0, 0), packed=True)
    assert p.shape == (8, 16, 2)
    for i in range(8):
        for n in range(16):
            assert p[i, n, 0] == mem[2 * i, n] and p[i, n, 1] == mem[2 * i + 1, n]
    m8 = (np.arange(32 * 16) % 100 - 50).astype(np.int8).reshape(32, 16)
    (q,) = _load_values(m8, i8, (32, 16), (0, 0), packed=True)
    assert q.shape == (8, 16, 4)
    assert q[3, 5].tolist() == [m8[12, 5], m8[13, 5], m8[14, 5], m8[15, 5]]


def test_load_nd_packed_oob_rows_are_zero():
    mem = np.arange(1, 3 * 16 + 1, dtype=np.float16).reshape(3, 16)
    (p,) = _load_values(mem, f16, (4, 16), (0, 0), packed=True)
    assert p[1, 0].tolist() == [mem[2, 0], 0]       # row 3 is outside the array


def test_load_nd_transpose_32bit():
    mem = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)  # memory view [N, K]
    (t,) = _load_values(mem, f32, (16, 8), (0, 0), transpose=[1, 0])
    np.testing.assert_array_equal(t, mem.T)


def test_load_nd_transpose_16bit_as_32bit_pairs_is_vnni():
    mem = np.arange(16 * 16, dtype=np.float16).reshape(16, 16)  # rows n, columns k
    (t,) = _load_values(mem, f16, (16, 16), (0, 0), transpose=[1, 0], transpose_bit_width=32)
    assert t.shape == (8, 16, 2)
    # word (i, n) holds k = 2i (low) and 2i + 1 (high) of memory row n: B = mem.T VNNI-packed
    np.testing.assert_array_equal(t, vnni_pack(mem.T, 2))
    assert t[3, 5].tolist() == [mem[5, 6], mem[5, 7]]


@pytest.mark.parametrize("dtype,np_t,K", [(f16, np.float16, 16), (i8, np.int8, 32), (f32, np.float32, 8)])
def test_load_nd_transpose_blocks_splits_the_memory_rows(dtype, np_t, K):
    """32 memory rows (N) of a transposed load give two DPAS B blocks: rows 0-15 and 16-31."""
    mem = (np.arange(32 * K) % 97 + 1).astype(np_t).reshape(32, K)     # rows n, columns k
    tbw = {"transpose_bit_width": 32} if dtype.bitwidth < 32 else {}
    lo, hi = _load_values(mem, dtype, (32, K), (0, 0), transpose=[1, 0], transpose_blocks=2, **tbw)
    v = 32 // dtype.bitwidth
    for half, got in ((mem[:16], lo), (mem[16:], hi)):
        np.testing.assert_array_equal(got, vnni_pack(half.T, v) if v > 1 else half.T)


def test_load_nd_transpose_blocks_needs_a_transposed_load():
    mem = np.ones((32, 16), np.float16)
    with pytest.raises(Exception, match="transpose_blocks"):
        _load_values(mem, f16, (32, 16), (0, 0), packed=True, transpose_blocks=2)


def test_create_nd_tdesc_on_column_major_array_uses_memory_view():
    logical = np.arange(12 * 16, dtype=np.float32).reshape(12, 16)
    colmajor = np.asfortranarray(logical)                    # memory: 16 rows of 12
    (t,) = _load_values(colmajor, f32, (8, 4), (2, 4))
    np.testing.assert_array_equal(t, logical.T[2:10, 4:8])


def test_store_nd_drops_out_of_bounds():
    out = np.full((5, 6), -1.0, np.float32)

    def build(b, args):
        t = TensorDescType((4, 4), f32)
        d = b.create("xegpu.create_nd_tdesc", [args[0], _idx(b, 3), _idx(b, 4)], [t]).result
        v = b.create("arith.constant", [], [VectorType((4, 4), f32)], {"value": 2.5}).result
        b.create("xegpu.store_nd", [v, d])
    _run(_fn([ArrayType(f32, 2)], build), [out], [f32])
    want = np.full((5, 6), -1.0, np.float32)
    want[3:5, 4:6] = 2.5
    np.testing.assert_array_equal(out, want)


def test_gather_scatter_masks_and_atomic():
    data = np.arange(10, dtype=np.int32)

    def build(b, args):
        offs = b.create("vector.step", [], [VectorType((1, 4), index)]).result
        three = b.create("vector.splat", [_idx(b, 3)], [VectorType((1, 4), index)]).result
        offs = b.create("arith.muli", [offs, three], [VectorType((1, 4), index)]).result  # 0 3 6 9
        t = TensorDescType((1, 4), i32, scattered=True)
        d = b.create("xegpu.create_tdesc", [args[0], offs], [t]).result
        tr = b.create("arith.constant", [], [VectorType((1, 4), i1)], {"value": True}).result
        g = b.create("xegpu.load_gather", [d, tr], [VectorType((1, 4), i32)], {"padding": -1}).result
        ten = b.create("arith.constant", [], [VectorType((1, 4), i32)], {"value": 100}).result
        b.create("xegpu.atomic_rmw", [d, tr, ten], [VectorType((1, 4), i32)], {"kind": "add"})
        b.create("xegpu.store_scatter", [g, d, tr])
    fn = _fn([ArrayType(i32, 1)], build)
    vals = Capture().run(fn, [Buffer(data, i32)], ["xegpu.load_gather", "xegpu.atomic_rmw"])
    assert vals["xegpu.load_gather"][0][0].tolist() == [[0, 3, 6, 9]]
    assert vals["xegpu.atomic_rmw"][0][0].tolist() == [[0, 3, 6, 9]]
    assert data.tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]   # scatter wrote back the old values


def test_block_gather_masks_outside_and_pads():
    mem = np.arange(1, 13, dtype=np.float32).reshape(3, 4)

    def build(b, args):
        t = TensorDescType((2, 4), f32, scattered=True)
        d = b.create("xegpu.create_tdesc", [args[0], _idx(b, 2), _idx(b, 1)], [t]).result
        b.create("xegpu.load_gather", [d], [VectorType((2, 4), f32)], {"padding": 9.0})
    fn = _fn([ArrayType(f32, 2)], build)
    vals = Capture().run(fn, [Buffer(mem, f32)], ["xegpu.load_gather"])
    assert vals["xegpu.load_gather"][0][0].tolist() == [[10, 11, 12, 9], [9, 9, 9, 9]]


def test_dpas_semantics_packed_b_equals_plain_and_tf32_rounds():
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (8, 16)).astype(np.float16)
    bm = rng.uniform(-1, 1, (16, 16)).astype(np.float16)
    from xejit.ir.xegpu import _dpas

    class Op:
        attributes = {}

        class result:
            pass
    op = Op()
    op.result = type("R", (), {"type": VectorType((8, 16), f32)})()
    (r1,) = _dpas(None, op, [a, bm])
    (r2,) = _dpas(None, op, [a, vnni_pack(bm, 2)])
    np.testing.assert_array_equal(r1, r2)
    np.testing.assert_allclose(r1, a.astype(np.float64) @ bm.astype(np.float64), rtol=1e-5, atol=1e-5)
    op.attributes = {"input_precision": "tf32"}
    x = np.full((8, 8), 1 + 2 ** -12, np.float32)            # below tf32's 10 mantissa bits
    (r3,) = _dpas(None, op, [x, np.eye(8, 16, dtype=np.float32)])
    assert r3[0, 0] == 1.0


def _verify_fails(build, match):
    fn = Function("k", [ArrayType(bf16, 2)], ["a"])
    b = Builder(fn.entry, verify=False)
    build(b, fn.args)
    b.create("func.return")
    with pytest.raises(VerifyError, match=match):
        verify_function(fn)


def test_verifiers_reject_bad_ops():
    def wrong_type(b, args):
        t = TensorDescType((8, 16), f16)
        b.create("xegpu.create_nd_tdesc", [args[0], _idx(b, 0), _idx(b, 0)], [t])
    _verify_fails(wrong_type, "element type")

    def bad_load(b, args):
        t = TensorDescType((8, 16), bf16)
        d = b.create("xegpu.create_nd_tdesc", [args[0], _idx(b, 0), _idx(b, 0)], [t]).result
        b.create("xegpu.load_nd", [d], [VectorType((8, 16), bf16)], {"packed": True})
    _verify_fails(bad_load, "produces")

    def bad_dpas(b, args):
        x = b.create("arith.constant", [], [VectorType((8, 16), bf16)], {"value": 1.0}).result
        y = b.create("arith.constant", [], [VectorType((8, 16), bf16)], {"value": 1.0}).result
        b.create("xegpu.dpas", [x, y], [VectorType((8, 16), f32)])
    _verify_fails(bad_dpas, "do not chain|chain")


def test_verify_for_target_reads_the_descriptor_limits():
    def fn_with(shape, dtype, count, attrs, n_res):
        fn = Function("k", [ArrayType(dtype, 2)], ["a"])
        b = Builder.at_end(fn.entry)
        t = TensorDescType(shape, dtype, array_length=count)
        d = b.create("xegpu.create_nd_tdesc", [fn.args[0], _idx(b, 0), _idx(b, 0)], [t]).result
        b.create("xegpu.load_nd", [d], load_result_types(t, attrs.get("packed", False)), attrs)
        b.create("func.return")
        return fn
    pvc = get_target("pvc")
    verify_for_target(fn_with((32, 16), bf16, 2, {}, 2), pvc, check_block_shape)
    with pytest.raises(VerifyError, match="at most 2 blocks"):
        verify_for_target(fn_with((8, 16), f32, 4, {}, 4), pvc, check_block_shape)
    with pytest.raises(VerifyError, match="exceeds 32 rows"):
        verify_for_target(fn_with((64, 16), bf16, 1, {}, 1), pvc, check_block_shape)


def test_printing_shows_descriptor_attributes():
    def build(b, args):
        t = TensorDescType((32, 16), bf16, array_length=2)
        d = b.create("xegpu.create_nd_tdesc", [args[0], _idx(b, 0), _idx(b, 0)], [t]).result
        b.create("xegpu.load_nd", [d], load_result_types(t, True), {"packed": True})
    text = print_function(_fn([ArrayType(bf16, 2)], build))
    assert "!xegpu.tensor_desc<32x16xbf16, #xegpu.block_tdesc_attr<array_length = 2>>" in text
    assert "xegpu.load_nd" in text and "{packed = true}" in text and "vector<16x16x2xbf16>" in text
