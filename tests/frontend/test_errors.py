"""CompilationError: position pinned to the offending line, no compiler internals in the message."""
import inspect

import numpy as np
import pytest

import xejit
import xejit.language as xl

A = np.zeros((64, 64), np.float32)
A16 = np.zeros((64, 64), np.float16)


def line_of(fn, needle):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, ln in enumerate(lines) if needle in ln)


def compile_error(k, *args, **kw):
    with pytest.raises(xejit.CompilationError) as info:
        k.compile_ir(*args, **kw)
    msg = str(info.value)
    for internal in ("Traceback", "codegen.py", "semantic.py", "xetile.py", "SemanticError",
                     "VerifyError"):
        assert internal not in msg
    assert info.value.__cause__ is None
    return info.value


def test_undefined_name():
    @xejit.kernel
    def k(a):
        x = undefined_thing + 1  # noqa: F821
    e = compile_error(k, A)
    assert e.line == line_of(k.fn, "undefined_thing") and "undefined name 'undefined_thing'" in str(e)
    assert e.col == e.source_line.index("undefined_thing")
    assert str(e).splitlines()[-1].index("^") == e.col


def test_unsupported_syntax_while_and_lambda():
    @xejit.kernel
    def k(a, n):
        while n:
            pass
    e = compile_error(k, A, 3)
    assert e.line == line_of(k.fn, "while") and "'while'" in e.message

    @xejit.kernel
    def k2(a):
        f = lambda x: x  # noqa: E731
    e = compile_error(k2, A)
    assert e.line == line_of(k2.fn, "lambda") and "Lambda" in e.message


def test_runtime_if_rejected():
    @xejit.kernel
    def k(a, n):
        if n > 3:
            pass
    e = compile_error(k, A, 1)
    assert e.line == line_of(k.fn, "if n > 3") and "xl.where" in e.message


def test_mma_shape_mismatch():
    @xejit.kernel
    def k(a, b):
        ta = xl.load_tile(xl.init_tile(a, [0, 0], [32, 16]))
        tb = xl.load_tile(xl.init_tile(b, [0, 0], [32, 32]))
        acc = xl.tile_mma(ta, tb)
    e = compile_error(k, A, A)
    assert e.line == line_of(k.fn, "tile_mma") and "do not chain" in e.message


def test_mma_dtype_mismatch():
    @xejit.kernel
    def k(a, b):
        ta = xl.load_tile(xl.init_tile(a, [0, 0], [32, 16]))
        tb = xl.load_tile(xl.init_tile(b, [0, 0], [16, 32]))
        acc = xl.tile_mma(ta, tb)
    e = compile_error(k, A16, A)
    assert e.line == line_of(k.fn, "tile_mma") and "one element type" in e.message


def test_layout_does_not_divide_tile():
    @xejit.kernel
    def k(a):
        t = xl.init_tile(a, [0, 0], [64, 48], wg_map=xl.wg_map([4, 2], [16, 32]))
    e = compile_error(k, A, num_subgroups=8)
    assert e.line == line_of(k.fn, "wg_map(") and "does not divide" in e.message


def test_layout_num_subgroups_mismatch():
    @xejit.kernel
    def k(a):
        t = xl.init_tile(a, [0, 0], [64, 64], wg_map=xl.wg_map([4, 2], [16, 32]))
    e = compile_error(k, A, num_subgroups=4)
    assert e.line == line_of(k.fn, "wg_map(") and "num_subgroups=4" in e.message


def test_error_inside_inline_helper_points_at_helper():
    e = compile_error(_uses_helper, A)
    assert e.line == line_of(_bad_helper, "nope") and e.file.endswith("test_errors.py")


@xl.inline
def _bad_helper(x):
    return x + nope  # noqa: F821


@xejit.kernel
def _uses_helper(a):
    t = xl.load_tile(xl.init_tile(a, [0, 0], [8, 8]))
    _bad_helper(t)


def test_loop_carried_type_change():
    @xejit.kernel
    def k(a, K):
        acc = xl.zeros([8, 8], xl.float32)
        for i in range(0, K, 1):
            acc = acc.to(xl.float16)
    e = compile_error(k, A, 4)
    assert e.line == line_of(k.fn, "for i in") and "changes type" in e.message


def test_loop_local_used_after_loop():
    @xejit.kernel
    def k(a, K):
        for i in range(0, K, 1):
            tmp = i * 2
        x = tmp + 1
    e = compile_error(k, A, 4)
    assert e.line == line_of(k.fn, "x = tmp") and "inside a runtime loop" in e.message


def test_store_dtype_mismatch_and_non_constexpr_shape():
    @xejit.kernel
    def k(a, b):
        t = xl.load_tile(xl.init_tile(a, [0, 0], [8, 8]))
        xl.store_tile(xl.init_tile(b, [0, 0], [8, 8]), t)
    e = compile_error(k, A, A16)
    assert e.line == line_of(k.fn, "store_tile") and ".to(" in e.message

    @xejit.kernel
    def k2(a, n):
        t = xl.init_tile(a, [0, 0], [n, 8])
    e = compile_error(k2, A, 8)
    assert "compile-time" in e.message


def test_order_mismatch_with_array_layout():
    @xejit.kernel
    def k(a):
        t = xl.init_tile(a, [0, 0], [8, 8], order=[0, 1])
    e = compile_error(k, A)
    assert "column-major" in e.message or "order" in e.message


def test_kernel_cannot_return_value():
    @xejit.kernel
    def k(a):
        return 1
    e = compile_error(k, A)
    assert e.line == line_of(k.fn, "return 1")


@pytest.mark.parametrize("stmt,needle", [
    ("for i in range(0, n, 1):\n            break", "Break"),
    ("for i in range(0, n, 1):\n            continue", "Continue"),
    ("x = [i for i in range(3)]", "ListComp"),
    ("x = (y := 3)", "NamedExpr"),
    ("t = xl.load_tile(xl.init_tile(a, [0, 0], [8, 8]))\n        u = t[0]", "indexing a tile"),
    ("x = (n < 3) < 4 < 5", "chained"),
    ("import os", "Import"),
    ("x = np.zeros(3)", "not supported"),
])
def test_rejected_constructs(stmt, needle):
    ns = {"xejit": xejit, "xl": xl, "np": np}
    src = f"def k(a, n):\n        {stmt}\n"
    import linecache
    fname = f"<rejected-{abs(hash(stmt))}>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    exec(compile(src, fname, "exec"), ns)
    e = compile_error(xejit.kernel(ns["k"]), A, 3)
    assert needle in e.message


def test_print_and_zip_loops(capsys):
    @xejit.kernel(interpret=True)
    def k(a, n):
        for s, w in zip((1, 2), (10.0, 20.0)):
            print("val", n * s + w)
    k[(2,)](A, 5)
    out = capsys.readouterr().out
    assert out.count("val") == 4 and "15.0" in out and "30.0" in out
