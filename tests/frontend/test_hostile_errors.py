"""Hostile input, part 1: one exception hierarchy.

Every error xejit raises on purpose is an ``XejitError``; those about a wrong argument are also
the built-in a Python caller catches (``TypeError`` / ``ValueError``). User mistakes in a kernel
are ``CompilationError``s pointing at the line, never "internal compiler error" (kept for bugs).
"""
import linecache

import numpy as np
import pytest

import xejit
import xejit.language as xl
from xejit.errors import ArgumentError, ArgumentValueError, LaunchError
from xejit.codegen.passes import CompilerError
from xejit.errors import CompilationError, XejitError, XejitTypeError, XejitValueError
from xejit.ir.core import VerifyError
from xejit.ir.interpreter import InterpreterError
from xejit.ir.verifier import IRVerificationError

A = np.ones((8, 16), np.float32)


def test_every_error_class_is_an_xejit_error():
    for cls in (InterpreterError, VerifyError, IRVerificationError, CompilerError, CompilationError,
                LaunchError, ArgumentError, ArgumentValueError, XejitTypeError, XejitValueError):
        assert issubclass(cls, XejitError), cls
    assert issubclass(InterpreterError, RuntimeError)
    assert issubclass(ArgumentError, TypeError) and issubclass(XejitTypeError, TypeError)
    assert issubclass(ArgumentValueError, ValueError) and issubclass(XejitValueError, ValueError)
    assert xejit.XejitTypeError is XejitTypeError and xejit.XejitValueError is XejitValueError


def _kernel_from(stmt: str, name: str):
    """A kernel ``k(a, n)`` whose body is ``stmt``, with its source in linecache (a real file's
    behaviour: line numbers and carets work)."""
    src = f"def k(a, n):\n    {stmt}\n"
    fname = f"<hostile-{name}>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    ns = {"xejit": xejit, "xl": xl, "np": np}
    exec(compile(src, fname, "exec"), ns)
    return xejit.kernel(ns["k"], interpret=True), src.splitlines()[1]


@pytest.mark.parametrize("name,stmt,needle,col_of", [
    ("range-float", "for i in range(2.5):\n        pass", "range(2.5)", "range"),
    ("range-str", "for i in static_range('a'):\n        pass", "range('a')", "static_range"),
    ("store-str", "xl.store_tile(xl.init_tile(a, [0, 0], [8, 16]), 'a')", "got str 'a'", "xl.store_tile"),
    ("store-none", "xl.store_tile(xl.init_tile(a, [0, 0], [8, 16]), None)", "got NoneType", "xl.store_tile"),
    ("full-str", "t = xl.full([8, 16], 'x', xl.float32)", "got str 'x'", "xl.full"),
    ("cdiv-zero", "x = xl.cdiv(3, 0)", "division", "xl.cdiv"),
    ("neg-str", "x = -'a'", "'a'", "-'a'"),
    ("len-int", "x = len(5)", "len(5)", "len"),
    ("arange-axis", "t = xl.arange(0, 16, axis=5)", "axis", "xl.arange"),
])
def test_user_mistakes_are_located_compilation_errors(name, stmt, needle, col_of):
    stmt = stmt.replace("static_range", "xl.static_range")
    col_of = col_of.replace("static_range", "xl.static_range")
    k, line = _kernel_from(stmt, name)
    with pytest.raises(CompilationError) as info:
        k[(1,)](A, 3)
    e = info.value
    assert "internal compiler error" not in e.message
    assert needle in e.message, e.message
    assert e.line == 2 and e.source_line == line
    assert e.col == line.index(col_of)
    assert str(e).splitlines()[-1] == " " * e.col + "^"


def test_compiler_bugs_are_still_internal_errors(monkeypatch):
    from xejit.frontend.semantic import Semantic

    def broken(self, *a, **k):
        raise KeyError("a compiler bug")
    monkeypatch.setattr(Semantic, "load_tile", broken)
    k, line = _kernel_from("t = xl.load_tile(xl.init_tile(a, [0, 0], [8, 16]))", "bug")
    with pytest.raises(CompilationError) as info:
        k[(1,)](A, 3)
    assert "internal compiler error: KeyError" in info.value.message and info.value.line == 2


def test_kernel_without_source_is_a_clear_error():
    ns = {"xejit": xejit, "xl": xl}
    exec("import xejit\n@xejit.kernel(interpret=True)\ndef k(a):\n    pass\n", ns)
    with pytest.raises(CompilationError) as info:
        ns["k"][(1,)](A)
    assert isinstance(info.value, XejitError) and not isinstance(info.value, OSError)
    assert "cannot read the source of 'k'" in info.value.message and "exec()" in info.value.message

    # a helper without source: the error points at the call in the kernel
    exec("import xejit.language as xl\n@xl.inline\ndef helper(x):\n    return x\n", ns)
    global _exec_helper
    _exec_helper = ns["helper"]

    @xejit.kernel(interpret=True)
    def k2(a):
        t = _exec_helper(1.0)  # noqa: F841

    with pytest.raises(CompilationError) as info:
        k2[(1,)](A)
    assert "cannot read the source of 'helper'" in info.value.message
    assert "_exec_helper(1.0)" in info.value.source_line


def test_unknown_emulated_target_is_a_value_error(monkeypatch):
    from xejit.device_launch import emulated_target

    monkeypatch.setenv("XEJIT_EMULATE", "pvcx")
    with pytest.raises(ValueError) as info:
        emulated_target()
    assert isinstance(info.value, XejitError)
    assert "XEJIT_EMULATE='pvcx'" in str(info.value) and "pvc, bmg, lnl, ptl, dg2, generic" in str(info.value)
    monkeypatch.setenv("XEJIT_EMULATE", "DG2")
    assert emulated_target() == "dg2"   # target names are case-insensitive
    monkeypatch.setenv("XEJIT_EMULATE", "")
    assert emulated_target() is None


def test_unknown_emulated_target_at_launch(monkeypatch):
    @xejit.kernel
    def k(x, y, BN: xl.constexpr):
        xl.store_tile(xl.init_tile(y, [0, 0], [1, BN]), xl.load_tile(xl.init_tile(x, [0, 0], [1, BN])))

    monkeypatch.setenv("XEJIT_EMULATE", "foo")
    x, y = np.ones(16, np.float32), np.zeros(16, np.float32)
    with pytest.raises(XejitValueError, match="known targets"):
        k[(1,)](x, y, BN=16)
    from xejit.codegen.targets import get_target
    with pytest.raises(XejitValueError, match="unknown target 'foo'"):
        get_target("foo")


@pytest.mark.parametrize("interpret", [True, False])
def test_bad_launch_arguments_are_type_errors(interpret):
    @xejit.kernel(interpret=interpret)
    def k(x, y, BN: xl.constexpr):
        xl.store_tile(xl.init_tile(y, [0, 0], [1, BN]), xl.load_tile(xl.init_tile(x, [0, 0], [1, BN])))

    y = np.zeros(16, np.float32)
    bad = [[1.0] * 16, "abc", np.ones(16, np.float64), np.ones(16, object),
           np.ma.masked_array(np.ones(16, np.float32), mask=[False] * 16)]
    for x in bad:
        with pytest.raises(TypeError) as info:
            k[(1,)](x, y, BN=16)
        assert isinstance(info.value, XejitError) and "argument 'x'" in str(info.value)
    with pytest.raises(TypeError) as info:     # wrong number of arguments
        k[(1,)](y, BN=16)
    assert isinstance(info.value, XejitError)
    with pytest.raises(TypeError) as info:     # no grid
        k(y, y, BN=16)
    assert isinstance(info.value, XejitError)
    with pytest.raises(ValueError) as info:
        k[(1,)](y, y, BN=16, grf_mode="huge")
    assert isinstance(info.value, XejitError)
    with pytest.raises(TypeError) as info:
        k[(1,)](y, y, BN=16, num_stages=1.5)
    assert isinstance(info.value, XejitError)


def test_launch_after_errors_still_correct():
    """The errors above leave the kernel usable: a numeric check against float64 numpy."""
    @xejit.kernel(interpret=True)
    def k(x, y, BN: xl.constexpr):
        t = xl.load_tile(xl.init_tile(x, [0, 0], [1, BN]))
        xl.store_tile(xl.init_tile(y, [0, 0], [1, BN]), t * 2.0 + 1.0)

    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 2.0, 16).astype(np.float32)
    y = np.full(16, np.nan, np.float32)
    with pytest.raises(TypeError):
        k[(1,)](list(x), y, BN=16)
    k[(1,)](x, y, BN=16)
    np.testing.assert_allclose(y, x.astype(np.float64) * 2 + 1, rtol=1e-6)
