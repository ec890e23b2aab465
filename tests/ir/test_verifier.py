"""One test per verifier rule, on IR built directly with the Builder."""
import numpy as np
import pytest

from xejit.ir import (ArrayType, Block, Builder, Function, IRVerificationError, Interpreter, Layout,
                      Region, TileType, VectorType, bf16, f16, f32, i1, i8, i32, index,
                      print_function, round_to_bf16, verify_function, wg_map)
from xejit.ir.core import Operation, VerifyError


def new_fn(*arg_types, num_subgroups=None):
    fn = Function("k", list(arg_types), [f"a{i}" for i in range(len(arg_types))],
                  {"num_subgroups": num_subgroups})
    b = Builder(fn.entry, verify=False)
    return fn, b


def idx(b, v=0):
    return b.create("arith.constant", [], [index], {"value": v}).result


def tile(b, arr, shape, dtype=f32, order=(1, 0), layout=None):
    return b.create("xetile.init_tile", [arr, idx(b), idx(b)],
                    [TileType(shape, dtype, order, layout)]).result


def vec(b, shape, dtype=f32, layout=None):
    attrs = {"value": 1}
    v = b.create("arith.constant", [], [VectorType(shape, dtype)], attrs).result
    return v


def fails(fn, b, match):
    b.create("func.return")
    with pytest.raises(IRVerificationError, match=match) as info:
        verify_function(fn)
    assert "=>" in str(info.value)  # the IR around the failing op is shown
    return info.value


def test_valid_gemm_ir_verifies_and_prints():
    fn, b = new_fn(ArrayType(bf16, 2), ArrayType(bf16, 2, (0, 1)), num_subgroups=32)
    ta = tile(b, fn.args[0], (256, 32), bf16, layout=wg_map([8, 4], [32, 32]))
    tb = tile(b, fn.args[1], (32, 256), bf16, order=(0, 1), layout=wg_map([8, 4], [32, 64]))
    va = b.create("xetile.load_tile", [ta], [VectorType((256, 32), bf16)]).result
    vb = b.create("xetile.load_tile", [tb], [VectorType((32, 256), bf16)]).result
    b.create("xetile.tile_mma", [va, vb], [VectorType((256, 256), f32)],
             {"layout": wg_map([8, 4], [32, 64])})
    b.create("func.return")
    verify_function(fn)
    text = print_function(fn)
    assert "#xetile.tile_attr<order = [0, 1], wg = #xetile.wg_map<sg_layout = [8, 4]" in text


def test_tile_order_must_match_array():
    fn, b = new_fn(ArrayType(f32, 2, (0, 1)))
    tile(b, fn.args[0], (8, 8), order=(1, 0))
    fails(fn, b, "does not match the array's memory order")


def test_tile_dtype_must_match_array():
    fn, b = new_fn(ArrayType(f32, 2))
    tile(b, fn.args[0], (8, 8), dtype=f16)
    fails(fn, b, "differs from the array's")


def test_tile_must_be_2d():
    fn, b = new_fn(ArrayType(f32, 2))
    b.create("xetile.init_tile", [fn.args[0], idx(b), idx(b)], [TileType((8,), f32)])
    fails(fn, b, "must be 2D")


@pytest.mark.parametrize("layout,match", [
    (Layout((4, 2), (16, 32)), "does not divide the tile"),
    (Layout((3, 1)), "sg_layout .* does not divide"),
    (Layout((2, 2), (32, 16), inst_data=(24, 16)), "inst_data"),
    (Layout((2, 2), (32, 16), lane_layout=(1, 16), lane_data=(1, 2)), "lane_layout"),
    (Layout((2,), (32,)), "rank"),
    (Layout((2, 2), (32, 16), order=(0, 0)), "permutation"),
])
def test_layout_rules(layout, match):
    fn, b = new_fn(ArrayType(f32, 2))
    tile(b, fn.args[0], (64, 48), layout=layout)
    fails(fn, b, match)


def test_layout_wraparound_is_legal():
    # RFC: sg_layout*sg_data may exceed the tile (subgroups share data) or divide it (round robin)
    fn, b = new_fn(ArrayType(f32, 2), num_subgroups=4)
    tile(b, fn.args[0], (128, 128), layout=wg_map([2, 2], [32, 128]))
    b.create("func.return")
    verify_function(fn)


def test_num_subgroups_rule():
    fn, b = new_fn(ArrayType(f32, 2), num_subgroups=8)
    tile(b, fn.args[0], (64, 64), layout=wg_map([2, 2]))
    fails(fn, b, "num_subgroups=8")


def test_load_tile_result_type():
    fn, b = new_fn(ArrayType(f32, 2))
    t = tile(b, fn.args[0], (8, 16))
    b.create("xetile.load_tile", [t], [VectorType((16, 8), f32)])
    fails(fn, b, "produces vector<8x16xf32>")


def test_store_shape_and_dtype():
    fn, b = new_fn(ArrayType(f32, 2))
    t = tile(b, fn.args[0], (8, 16))
    b.create("xetile.store_tile", [vec(b, (8, 16), f16), t], [])
    fails(fn, b, "differs from the tile's")
    fn, b = new_fn(ArrayType(f32, 2))
    t = tile(b, fn.args[0], (8, 16))
    b.create("xetile.store_tile", [vec(b, (8, 8)), t], [])
    fails(fn, b, "of the tile's shape")


def test_mma_rules():
    for (sa, sb, da, db, acc, match) in [
        ((8, 16), (8, 16), bf16, bf16, None, "do not chain"),
        ((8, 16), (16, 8), bf16, f16, None, "one element type"),
        ((8, 16), (16, 8), i32, i32, None, "does not support"),
        ((8, 16), (16, 8), i8, i8, VectorType((8, 8), f32), "accumulator must be vector<8x8xi32>"),
    ]:
        fn, b = new_fn()
        ops = [vec(b, sa, da), vec(b, sb, db)] + ([vec(b, acc.shape, acc.dtype)] if acc else [])
        rt = VectorType((sa[0], sb[1]), i32 if da == i8 else f32)
        b.create("xetile.tile_mma", ops, [rt])
        fails(fn, b, match)


def test_mma_operand_layout_must_derive_from_result():
    fn, b = new_fn(ArrayType(bf16, 2), num_subgroups=32)
    ta = tile(b, fn.args[0], (256, 32), bf16, layout=wg_map([8, 4], [16, 32]))  # should be [32, 32]
    va = b.create("xetile.load_tile", [ta], [VectorType((256, 32), bf16)]).result
    b.create("xetile.tile_mma", [va, vec(b, (32, 256), bf16)], [VectorType((256, 256), f32)],
             {"layout": wg_map([8, 4], [32, 64])})
    fails(fn, b, "convert_layout")


def test_reduce_broadcast_transpose_rules():
    cases = [
        ("xetile.tile_reduce", {"kind": "add", "dims": [1]}, (8, 16), VectorType((8, 16), f32), "produces"),
        ("xetile.tile_reduce", {"kind": "and", "dims": [1]}, (8, 16), VectorType((8, 1), f32), "integers"),
        ("xetile.tile_reduce", {"kind": "add", "dims": [0, 1]}, (8, 16), VectorType((1, 1), f32), "one dimension"),
        ("xetile.tile_broadcast", {"dims": [0]}, (2, 16), VectorType((8, 16), f32), "size 1"),
        ("xetile.tile_broadcast", {"dims": [0]}, (1, 16), VectorType((8, 8), f32), "keeps dim"),
        ("xetile.tile_transpose", {"permutation": [1, 0]}, (8, 16), VectorType((8, 16), f32), "produces"),
    ]
    for name, attrs, shape, rt, match in cases:
        fn, b = new_fn()
        b.create(name, [vec(b, shape)], [rt], attrs)
        fails(fn, b, match)


def test_broadcast_input_layout_rule():
    # RFC: the broadcast dim of the input's sg_data must be 1
    fn, b = new_fn(num_subgroups=16)
    src = b.create("xetile.convert_layout", [vec(b, (256, 1))], [VectorType((256, 1), f32)],
                   {"layout": wg_map([16, 1], [16, 1])}).result
    b.create("xetile.tile_broadcast", [src], [VectorType((256, 256), f32)],
             {"dims": [1], "layout": wg_map([16, 1], [16, 256])})
    b.create("func.return")
    verify_function(fn)
    fn, b = new_fn(num_subgroups=16)
    src = b.create("xetile.convert_layout", [vec(b, (256, 1))], [VectorType((256, 1), f32)],
                   {"layout": wg_map([16, 1], [16, 1])}).result
    b.create("xetile.tile_broadcast", [src], [VectorType((256, 256), f32)],
             {"dims": [1], "layout": wg_map([16, 1], [8, 256])})
    fails(fn, b, "requires")


def _reduce_with(src_layout, res_layout):
    fn, b = new_fn(num_subgroups=4)
    src = b.create("xetile.convert_layout", [vec(b, (8, 64))], [VectorType((8, 64), f32)],
                   {"layout": src_layout}).result
    b.create("xetile.tile_reduce", [src], [VectorType((8, 1), f32)],
             {"kind": "add", "dims": [1], "layout": res_layout})
    return fn, b


def test_reduce_input_layout_rule_and_the_split_reduce_extension():
    # RFC: the source keeps sg_layout, has the full extent in the reduced dim
    fn, b = _reduce_with(wg_map([4, 1], [2, 64]), wg_map([4, 1], [2, 1]))
    b.create("func.return")
    verify_function(fn)
    # xejit: the reduced dim may be split over the subgroups (combined through SLM) ...
    fn, b = _reduce_with(wg_map([1, 4], [8, 16]), wg_map([1, 4], [8, 1]))
    b.create("func.return")
    verify_function(fn)
    # ... but the other dim, the sg_layout and the order must still agree
    fails(*_reduce_with(wg_map([1, 4], [4, 16]), wg_map([1, 4], [8, 1])), "requires")
    fails(*_reduce_with(wg_map([2, 2], [4, 32]), wg_map([1, 4], [8, 1])), "requires")
    fails(*_reduce_with(Layout((1, 4), (8, 16), order=(0, 1)), wg_map([1, 4], [8, 1])), "requires")
    fn, b = _reduce_with(wg_map([1, 4], [8, 8]), wg_map([1, 4], [8, 1]))   # round-robin blocks: a split too
    b.create("func.return")
    verify_function(fn)


def test_elementwise_rules():
    fn, b = new_fn()
    b.create("arith.addf", [vec(b, (8, 8)), vec(b, (8, 8), f16)], [VectorType((8, 8), f32)])
    fails(fn, b, "one type")
    fn, b = new_fn()
    b.create("arith.addi", [vec(b, (8, 8)), vec(b, (8, 8))], [VectorType((8, 8), f32)])
    fails(fn, b, "integer type")
    fn, b = new_fn(num_subgroups=4)
    x = b.create("xetile.convert_layout", [vec(b, (8, 8))], [VectorType((8, 8), f32)],
                 {"layout": wg_map([2, 2])}).result
    y = b.create("xetile.convert_layout", [vec(b, (8, 8))], [VectorType((8, 8), f32)],
                 {"layout": wg_map([4, 1])}).result
    b.create("arith.addf", [x, y], [VectorType((8, 8), f32)])
    fails(fn, b, "different layouts")


def test_gather_scatter_rules():
    fn, b = new_fn(ArrayType(f32, 1))
    offs = vec(b, (1, 16), index)
    t = b.create("xetile.init_tile", [fn.args[0], offs], [TileType((1, 16), f32, scatter=True)]).result
    b.create("xetile.load_gather", [t, vec(b, (1, 8), i1)], [VectorType((1, 16), f32)])
    fails(fn, b, "mask must be")
    fn, b = new_fn(ArrayType(f32, 2))
    t = tile(b, fn.args[0], (8, 8))
    b.create("xetile.load_gather", [t, vec(b, (8, 8), i1)], [VectorType((8, 8), f32)])
    fails(fn, b, "scatter tile")


def test_atomic_kind_rule():
    fn, b = new_fn(ArrayType(f32, 2))
    t = tile(b, fn.args[0], (8, 8))
    b.create("xetile.atomic_rmw_tile", [vec(b, (8, 8)), t], [VectorType((8, 8), f32)], {"kind": "xor"})
    fails(fn, b, "needs integers")


def test_structure_rules():
    fn, b = new_fn()
    other = Operation("arith.constant", [], [index], {"value": 1})   # never inserted
    b.create("arith.addi", [other.result, other.result], [index])
    fails(fn, b, "not defined before")
    fn, b = new_fn()
    body = Block([index, f32])
    Builder(body, verify=False).create("scf.yield", [vec(b, (2, 2))], [])
    b.create("scf.for", [idx(b), idx(b, 4), idx(b, 1), b.create(
        "arith.constant", [], [f32], {"value": 0.0}).result], [f32], regions=[Region([body])])
    fails(fn, b, "yield|not defined")


def test_for_loop_interprets_with_carried_values():
    fn, b = new_fn(index)
    body = Block([index, index])
    bb = Builder(body)
    s = bb.create("arith.addi", [body.args[1], body.args[0]], [index]).result
    bb.create("scf.yield", [s], [])
    loop = b.create("scf.for", [idx(b, 0), fn.args[0], idx(b, 1), idx(b, 0)], [index],
                    regions=[Region([body])])
    b.create("xejit.print", [loop.result], [], {"prefix": "sum", "names": ["s"]})
    b.create("func.return")
    verify_function(fn)
    seen = []
    it = Interpreter()
    it.impls = dict(it.impls, **{"xejit.print": lambda i, op, args: seen.append(int(args[0]))})
    it.run_grid(fn, (2,), [np.int64(5)])
    assert seen == [10, 10]


def test_bf16_rounding_is_nearest_even():
    x = np.array([1.0, 1.00390625, 1.01171875, 3.14159265, -2.5e-3, np.inf], np.float32)
    r = round_to_bf16(x)
    assert r[1] == 1.0 and r[2] == 1.015625   # ties go to even mantissa
    assert abs(r[3] - 3.140625) < 1e-7 and np.isinf(r[5])
    assert np.all(np.abs(r[:5] - x[:5]) <= np.abs(x[:5]) * 2 ** -8)


def test_builder_verifies_on_create():
    fn = Function("k", [], [])
    b = Builder(fn.entry)
    with pytest.raises(VerifyError, match="works on scalars"):
        b.create("math.exp", [fn.entry.add_arg(TileType((8, 8), f32))], [TileType((8, 8), f32)])
