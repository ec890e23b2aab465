"""Hostile input, part 3: literals that do not fit their type are compile errors (numpy 2's rule
for Python scalars), never wrapped; tile_broadcast never shrinks. Values at the edges of each
type still work, checked against numpy on the device and in the interpreter."""
import linecache

import numpy as np
import pytest

import xejit
import xejit.language as xl
from xejit.errors import CompilationError

BN = 16


@pytest.fixture(params=[True, False], ids=["interpret", "device"])
def interpret(request):
    return request.param


def _kernel(body: str, name: str, interpret: bool):
    """``k(x, out)``: loads ``t`` (1 x BN) from x, runs ``body`` (which sets ``r``), stores r."""
    src = ("def k(x, out):\n"
           f"    t = xl.load_tile(xl.init_tile(x, [0, 0], [1, {BN}]))\n"
           f"    {body}\n"
           f"    xl.store_tile(xl.init_tile(out, [0, 0], [1, {BN}]), r)\n")
    fname = f"<literal-{name}>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    ns = {"xl": xl}
    exec(compile(src, fname, "exec"), ns)
    return xejit.kernel(ns["k"], interpret=interpret)


def _random(dtype, lo, hi, seed=0):
    rng = np.random.default_rng(seed)
    v = rng.integers(lo, hi, BN) if np.dtype(dtype).kind in "iu" else rng.uniform(lo, hi, BN)
    v = np.where(v == 0, 1, v)          # never zero
    return v.astype(dtype)


@pytest.mark.parametrize("name,dtype,lo,hi,body,ref", [
    ("i8-max", np.int8, 1, 20, "r = t + 107", lambda x: x.astype(np.int64) + 107),
    ("i8-min", np.int8, 1, 20, "r = t + -128", lambda x: x.astype(np.int64) - 128),
    ("i8-full", np.int8, -20, 20, "r = t + xl.full([1, 16], 127, xl.int8) - 127",
     lambda x: x.astype(np.int64)),
    ("u8-max", np.uint8, 1, 50, "r = t + 205", lambda x: x.astype(np.int64) + 205),
    ("u8-invert", np.uint8, 1, 255, "r = ~t", lambda x: 255 - x.astype(np.int64)),
    ("i32-edges", np.int32, -1000, 1000, "r = t + 2147483647 - 2147483647 + -2147483648 + 2147483647",
     lambda x: x.astype(np.int64) - 1),
    ("f16-max", np.float16, 0.5, 2.0, "r = t * 0.0 + 65504.0 - t", lambda x: 65504.0 - x.astype(np.float64)),
    ("f32-big", np.float32, 0.5, 1.1, "r = t * 3.0e38", lambda x: x.astype(np.float64) * 3.0e38),
    ("f16-inf", np.float16, 0.5, 2.0, "r = xl.minimum(t, float('inf'))", lambda x: x.astype(np.float64)),
])
def test_literals_at_the_edges_of_their_type(interpret, name, dtype, lo, hi, body, ref):
    x = _random(dtype, lo, hi)
    expect = ref(x)
    out = np.full(BN, 1 if np.dtype(dtype).kind in "iu" else np.nan, dtype)
    _kernel(body, name, interpret)[(1,)](x, out)
    if np.dtype(dtype).kind in "iu":
        assert (out == 1).sum() < BN
        np.testing.assert_array_equal(out.astype(np.int64), expect)
    else:
        np.testing.assert_allclose(out.astype(np.float64), expect, rtol=1e-2 if dtype == np.float16 else 1e-5)


@pytest.mark.parametrize("name,dtype,body,needle", [
    ("full-300-i8", np.int8, "r = xl.full([1, 16], 300, xl.int8)", "300 does not fit in i8 (range -128..127)"),
    ("full-neg-u8", np.uint8, "r = xl.full([1, 16], -1, xl.uint8)", "-1 does not fit in u8"),
    ("add-300-i8", np.int8, "r = t + 300", "300 does not fit in i8"),
    ("mul-neg-u8", np.uint8, "r = t * -1", "-1 does not fit in u8"),
    ("i32-2-31", np.int32, "r = t + 2147483648", "2147483648 does not fit in i32"),
    ("i32-huge", np.int32, "r = t + 10 ** 400", "does not fit in i32"),
    ("full-frac-i32", np.int32, "r = xl.full([1, 16], 2.5, xl.int32)", "cannot use the float 2.5 as i32"),
    ("f16-1e40", np.float16, "r = xl.full([1, 16], 1e40, xl.float16)", "overflows f16"),
    ("f16-70000", np.float16, "r = t + 70000.0", "overflows f16"),
    ("f32-1e39", np.float32, "r = t * 1e39", "overflows f32"),
    ("f32-int-huge", np.float32, "r = t * 10 ** 400", "overflows f32"),
    ("pad-300-i8", np.int8, "r = xl.load_tile(xl.init_tile(x, [0, 0], [1, 16]), padding=300)",
     "the padding 300 does not fit in i8"),
    ("where-i1", np.int8, "r = xl.where(t > 0, t, t) + xl.where(xl.full([1, 16], 2, xl.int1), 0, 0)",
     "not a bool"),
    ("shrink-broadcast", np.float32, "r = xl.tile_broadcast(t + xl.zeros([4, 16], xl.float32), [1, 16])",
     "cannot broadcast a [4, 16] tile to [1, 16]"),
    ("broadcast-differ", np.float32, "r = xl.tile_broadcast(t, [1, 8])", "cannot broadcast a [1, 16] tile to [1, 8]"),
    ("broadcast-rank", np.float32, "r = xl.tile_broadcast(t, [1, 16, 2])", "cannot broadcast"),
])
def test_literals_that_do_not_fit_are_compile_errors(name, dtype, body, needle):
    k = _kernel(body, name, True)
    x, out = np.ones(BN, dtype), np.zeros(BN, dtype)
    with pytest.raises(CompilationError) as info:
        k[(1,)](x, out)
    e = info.value
    assert needle in e.message and "internal" not in e.message, e.message
    assert e.line == 3 and e.source_line.strip() == body
    assert (out == 0).all()


def test_bf16_literal_rounding_to_inf_is_an_error():
    """3.4e38 is a finite f32 but rounds to inf in bf16 (largest bf16: 3.3895e38)."""
    k = _kernel("r = (t.to(xl.bfloat16) + 3.4e38).to(xl.float32)", "bf16-inf", True)
    with pytest.raises(CompilationError, match="overflows bf16"):
        k[(1,)](np.ones(BN, np.float32), np.zeros(BN, np.float32))


def test_tile_broadcast_grows_size_one_dims(interpret):
    """The legal case next to the shrinking one: [1, 16] -> [4, 16] repeats the row."""
    src = ("def k(x, out):\n"
           "    t = xl.load_tile(xl.init_tile(x, [0, 0], [1, 16]))\n"
           "    xl.store_tile(xl.init_tile(out, [0, 0], [4, 16]), xl.tile_broadcast(t * 2.0, [4, 16]))\n")
    linecache.cache["<bcast-ok>"] = (len(src), None, src.splitlines(True), "<bcast-ok>")
    ns = {"xl": xl}
    exec(compile(src, "<bcast-ok>", "exec"), ns)
    x = _random(np.float32, 0.5, 2.0)
    out = np.full((4, 16), np.nan, np.float32)
    xejit.kernel(ns["k"], interpret=interpret)[(1,)](x, out)
    np.testing.assert_allclose(out, np.broadcast_to(x.astype(np.float64) * 2, (4, 16)), rtol=1e-6)
