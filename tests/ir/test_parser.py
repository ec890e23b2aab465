"""The IR parser reads back what the printer writes: print -> parse -> print is the identity at
every level (frontend XeTile, with layouts, subgroup XeTile, XeGPU for pvc and dg2), the parsed
IR computes what the original does, and bad text is a ParseError naming line and column."""
from __future__ import annotations

import numpy as np
import pytest

import xejit.language as xl
from xejit.codegen.passes.registry import PassOptions, run_passes
from xejit.ir import Buffer, Interpreter
from xejit.ir.core import ArrayType, TileType, VectorType, f16, f32, i8, wg_map
from xejit.ir.parser import ParseError, parse_function, parse_module, parse_type
from xejit.ir.printer import print_function, print_module
from xejit.ir.xegpu import TensorDescType
from xejit.kernels.gemm import gemm_kernel

from .. import kernels as K

X32 = np.zeros((64, 64), np.float32)
X16 = np.zeros((64, 64), np.float16)
I8 = np.zeros((64, 64), np.int8)

# (id, kernel, args, constexprs): a corpus that covers every op the frontend emits in the tests.
CORPUS = [
    ("matmul", K.matmul, (X32, X32, X32, 64, 64, 64), dict(BM=32, BN=32, BK=16, num_subgroups=4)),
    ("matmul_int", K.matmul_int, (I8, I8, np.zeros((64, 64), np.int32), 64, 64, 64),
     dict(BM=32, BN=32, BK=32)),
    ("bias_relu", K.matmul_bias_relu, (X16, X16, X32[0], X32, 64, 64, 64), dict(BM=16, BN=32, BK=16)),
    ("splitk", K.matmul_splitk, (X32, X32, X32, 64, 64, 64), dict(BM=16, BN=16, BK=8, KSPLIT=2)),
    ("softmax", K.softmax, (X32, X32), dict(BM=8, BN=64, num_subgroups=2)),
    ("eltwise", K.eltwise, (X32, X32, X32), dict(BM=16, BN=32)),
    ("colsum", K.colsum, (X32, X32[:1]), dict(BM=64, BN=16)),
    ("transpose", K.transpose, (X32, X32), dict(BM=16, BN=16, num_subgroups=2)),
    ("rowsum_convert", K.rowsum_convert, (X32, X32[:, :1]),
     dict(BM=8, BN=64, SGL=[1, 4], SGD=[8, 16], SGL2=[4, 1], SGD2=[2, 64], num_subgroups=4)),
    ("transpose_layout", K.transpose_layout, (X32, X32),
     dict(BM=16, BN=32, SGL=[1, 4], SGD=[16, 8], SGL2=[4, 1], SGD2=[8, 16], num_subgroups=4)),
    ("colsum_layout", K.colsum_layout, (X32, X32[:1]), dict(BM=16, BN=32, SGL=[2, 2], SGD=[8, 16],
                                                             num_subgroups=4)),
    ("gemm_gelu", gemm_kernel, (X16, X16, X16[0], X32, 64, 64, 64),
     dict(BM=32, BN=32, BK=16, HAS_BIAS=True, ACT="gelu_tanh", num_subgroups=2)),
]

STAGES = {  # level name -> passes from the frontend's IR
    "xetile": [],
    "xetile-layout": ["layout"],
    "xetile-pipelined": ["layout", "pipelining"],
    "xetile-sg": ["layout", "pipelining", "wg-to-sg", "cleanup"],
    "xegpu": ["layout", "pipelining", "wg-to-sg", "cleanup", "blocking", "lane-distribution"],
}


def frontend_ir(kernel, args, kw):
    return kernel.compile_ir(*args, **kw).functions[0]


def assert_round_trip(fn):
    text = print_function(fn)
    again = print_function(parse_function(text))
    assert again == text


@pytest.mark.parametrize("case", CORPUS, ids=[c[0] for c in CORPUS])
@pytest.mark.parametrize("target", ["pvc", "dg2"])
def test_round_trip_every_level(case, target):
    _, kernel, args, kw = case
    fn = frontend_ir(kernel, args, kw)
    for passes in STAGES.values():
        if target == "dg2" and "pipelining" in passes:   # dg2 has no 2D block IO to prefetch with
            passes = [p for p in passes if p != "pipelining"]
        assert_round_trip(run_passes(fn, passes, PassOptions(target=target)))


def test_parsed_ir_computes_the_same():
    """Differential: the parsed subgroup IR gives the original's result on random inputs."""
    rng = np.random.default_rng(0)
    fn = frontend_ir(K.matmul, (X32, X32, X32, 40, 48, 24), dict(BM=16, BN=16, BK=8))
    a = rng.standard_normal((40, 24)).astype(np.float32)
    b = rng.standard_normal((24, 48)).astype(np.float32)
    outs = []
    for f in (fn, parse_function(print_function(fn))):
        c = np.full((40, 48), np.nan, np.float32)   # poisoned
        Interpreter().run_grid(f, (3, 3), [Buffer(a, f32), Buffer(b, f32), Buffer(c, f32),
                                           np.int64(40), np.int64(48), np.int64(24)])
        outs.append(c)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(outs[0], ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(outs[1], outs[0])


@pytest.mark.parametrize("t", [
    VectorType((8, 16), f16), VectorType((4,), i8), ArrayType(f32, 2), ArrayType(f16, 2, (0, 1), False),
    ArrayType(f32, 1), TileType((8, 32), f32, (0, 1), wg_map([2, 2], [4, 16]), True),
    TensorDescType((16, 16), f16, 2, False), TensorDescType((16,), f32, scattered=True),
])
def test_types_round_trip(t):
    assert parse_type(str(t)) == t


def test_module_with_two_functions():
    text = print_module(K.eltwise.compile_ir(X32, X32, X32, BM=8, BN=16))
    mod = parse_module(text + "\n\n" + text.replace("@eltwise", "@other"))
    assert [f.name for f in mod.functions] == ["eltwise", "other"]


@pytest.mark.parametrize("text, where, what", [
    ("func.func @k() {\n  %0 = arith.addi %x, %x : index\n  func.return\n}", "line 2:", "undefined value %x"),
    ("func.func @k() {\n  %0 = arith.constant 1 : vector<4xq9>\n  func.return\n}", "line 2:", "bad shape"),
    ("func.func @k() {\n  %0 = arith.constant 1 : index\n  %0 = arith.constant 2 : index\n  func.return\n}",
     "line 3:", "defined twice"),
    ("func.func @k() {\n  %0 = nosuch.op : index\n  func.return\n}", "line 2:", "unknown op"),
    ("func.func @k() {\n  func.return\n", "line 3:", "missing '}'"),
    ("func.func @k(%a: index) {\n  %0, %1 = arith.addi %a, %a : index\n  func.return\n}", "line 2:",
     "expects 1 results"),
])
def test_errors_name_line_and_column(text, where, what):
    with pytest.raises(ParseError) as e:
        parse_function(text)
    assert where in str(e.value) and what in str(e.value) and "^" in str(e.value)
    assert isinstance(e.value, ValueError)


def test_constexpr_types_parse_like_numpy():
    """Constants the frontend folds (inf, nan, negative, exponent) read back as the same floats."""
    fn = parse_function("func.func @k() {\n  %0 = arith.constant -inf : f32\n  %1 = arith.constant 1e-05 : f32\n"
                        "  %2 = arith.constant nan : f32\n  %3 = arith.constant -7 : index\n  func.return\n}")
    vals = [op.attributes["value"] for op in fn.entry.ops[:4]]
    assert vals[0] == -np.inf and vals[1] == 1e-05 and np.isnan(vals[2]) and vals[3] == -7
    assert xl.float32 is not None
