"""Python AST -> XeTile IR (an AST walk like Triton's code generator, not a tracer).

Compile-time values (constexpr parameters, literals, globals) are folded while walking;
runtime values are IR values. ``for`` over ``range`` with runtime bounds becomes ``scf.for``
whose loop-carried values are the names the body reassigns; ``if`` and loops over compile-time
values are evaluated during the walk. Every failure becomes one :class:`CompilationError`
raised in :meth:`CodeGenerator.visit` with the kernel's file, line, column and source text.
"""
from __future__ import annotations

import operator
import ast
import builtins
import inspect
import linecache
import math
import textwrap
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .. import options
from ..errors import CompilationError
from ..ir.core import (ArrayType, Builder, Block, Function, Layout, Location, Module, Region,
                       ScalarType, TileType, Type, Value, VectorType, VerifyError, f32, index)
from ..ir.verifier import IRVerificationError, verify_function
from .semantic import Semantic, SemanticError, is_runtime, type_name

_COMPILE_TIME_BUILTINS = {"min", "max", "abs", "len", "int", "float", "bool", "range", "tuple",
                          "list", "zip", "enumerate", "isinstance", "print", "breakpoint", "sum"}
_ALLOWED_MODULES = (math,)


@dataclass
class SourceInfo:
    """Where a function's source lives, to turn AST positions into file:line:col."""
    file: str
    first_line: int  # line number of the source's first line in the file
    indent: int      # columns removed by dedent
    lines: list[str]

    @classmethod
    def of(cls, fn: Callable) -> tuple["SourceInfo", ast.FunctionDef]:
        try:
            lines, first = inspect.getsourcelines(fn)
        except (OSError, TypeError) as e:
            code = getattr(fn, "__code__", None)
            raise CompilationError(
                f"cannot read the source of {getattr(fn, '__qualname__', fn)!r} ({e}): xejit compiles "
                f"a kernel and the helpers it calls from their Python source, which a function made "
                f"by exec(), eval() or typed at an interactive prompt does not keep; define it in a "
                f"file (or put its source in linecache under the filename passed to compile())",
                file=getattr(code, "co_filename", "<unknown>"),
                line=getattr(code, "co_firstlineno", 0)) from None
        raw = "".join(lines)
        text = textwrap.dedent(raw)
        indent = len(lines[0]) - len(lines[0].lstrip()) if text != raw else 0
        tree = ast.parse(text)
        fdef = tree.body[0]
        if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
            raise CompilationError(f"{fn.__name__} is not a function definition")
        file = inspect.getsourcefile(fn) or "<unknown>"
        return cls(file, first, indent, [ln.rstrip("\n") for ln in lines]), fdef

    def error(self, node: ast.AST | None, message: str) -> CompilationError:
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0) + self.indent
        src = self.lines[line - 1] if 0 < line <= len(self.lines) else None
        return CompilationError(message, file=self.file, line=self.first_line + line - 1,
                                col=col, source_line=src)

    def loc(self, node: ast.AST, func: str) -> Location:
        return Location(self.file, self.first_line + getattr(node, "lineno", 1) - 1,
                        getattr(node, "col_offset", 0) + self.indent, func)


class _Return(Exception):
    """Carries a helper's return value out of its body walk."""

    def __init__(self, value: Any):
        self.value = value


class _BoundMethod:
    """``x.to`` and friends: a method of a runtime value, resolved when called."""

    def __init__(self, name: str, obj: Value):
        self.name, self.obj = name, obj


class _ArrayDims(tuple):
    """``a.shape`` / ``a.strides``: a tuple of index values built on first use."""


class CodeGenerator(ast.NodeVisitor):
    """Walks one function body, emitting IR through :class:`Semantic`."""

    def __init__(self, fn: Callable, builder: Builder, scope: dict[str, Any],
                 src: SourceInfo, fdef: ast.FunctionDef, depth: int = 0,
                 reads: dict[tuple[int, str], "GlobalRead"] | None = None):
        self.fn = fn
        self.b = builder
        self.sem = Semantic(builder)
        self.scope = scope
        self.src = src
        self.fdef = fdef
        self.depth = depth
        self.module_globals = getattr(fn, "__globals__", {})
        self.globals = dict(self.module_globals)
        self.cells: dict[str, Any] = {}
        code = getattr(fn, "__code__", None)
        if code is not None and fn.__closure__:
            for name, cell in zip(code.co_freevars, fn.__closure__):
                try:
                    self.globals[name] = cell.cell_contents
                    self.cells[name] = cell
                except ValueError:
                    pass
        self.loop_locals: set[str] = set()
        #: every global / closure variable the kernel and its inlined helpers read, shared by all
        #: generators of one build (the jit recompiles when one of them changes)
        self.reads: dict[tuple[int, str], GlobalRead] = {} if reads is None else reads

    # --- one place where errors get their position --------------------------------------------

    def visit(self, node: ast.AST) -> Any:
        saved = self.b.loc
        if hasattr(node, "lineno"):
            self.b.loc = self.src.loc(node, self.fdef.name)
        try:
            return super().visit(node)
        except (CompilationError, _Return):
            raise
        except (SemanticError, VerifyError) as e:
            raise self.src.error(node, str(e)) from None
        except Exception as e:  # a compiler bug: still point at the line, keep the cause
            if options.current().debug:
                raise
            raise self.src.error(node, f"internal compiler error: {type(e).__name__}: {e}") from e
        finally:
            self.b.loc = saved

    def generic_visit(self, node: ast.AST) -> Any:
        raise SemanticError(f"unsupported Python syntax inside a kernel: {type(node).__name__}"
                            + _HINTS.get(type(node).__name__, ""))

    # --- statements -----------------------------------------------------------------------------

    def visit_body(self, stmts: Sequence[ast.stmt]) -> None:
        for s in stmts:
            self.visit(s)

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        self.visit(node.value)

    def visit_Pass(self, node: ast.Pass) -> None:
        pass

    def visit_Assign(self, node: ast.Assign) -> None:
        value = self.visit(node.value)
        for target in node.targets:
            self.assign(target, value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            raise SemanticError("a bare annotation declares nothing inside a kernel")
        self.assign(node.target, self.visit(node.value))

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if not isinstance(node.target, ast.Name):
            raise SemanticError("augmented assignment only to a plain name")
        current = self.lookup(node.target.id, node.target)
        self.assign(node.target, self.binop(node.op, current, self.visit(node.value)))

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            if isinstance(value, Value) and value.name_hint is None:
                value.name_hint = target.id
            self.scope[target.id] = value
            self.loop_locals.discard(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, (tuple, list)) or len(value) != len(target.elts):
                raise SemanticError(f"cannot unpack {type_name(value)} into {len(target.elts)} names")
            for t, v in zip(target.elts, value):
                self.assign(t, v)
        else:
            raise SemanticError(f"unsupported assignment target: {type(target).__name__} "
                                f"(tiles are values; assign to a name)")

    def visit_If(self, node: ast.If) -> None:
        cond = self.visit(node.test)
        if is_runtime(cond):
            raise SemanticError("'if' on a runtime value is not supported; the condition must be "
                                "a compile-time (constexpr) value. Use xl.where(cond, a, b) to "
                                "select between values")
        self.visit_body(node.body if cond else node.orelse)

    def visit_Assert(self, node: ast.Assert) -> None:
        cond = self.visit(node.test)
        if is_runtime(cond):
            raise SemanticError("assert needs a compile-time condition")
        if not cond:
            msg = self.visit(node.msg) if node.msg is not None else "assertion failed"
            raise SemanticError(f"static assert failed: {msg}")

    def visit_Return(self, node: ast.Return) -> None:
        if self.depth == 0:
            if node.value is not None:
                raise SemanticError("a kernel cannot return a value; store results with store_tile")
            raise SemanticError("'return' inside a kernel is not supported; kernels end at their "
                                "last statement")
        raise _Return(None if node.value is None else self.visit(node.value))

    def visit_For(self, node: ast.For) -> None:
        if node.orelse:
            raise SemanticError("'for ... else' is not supported inside a kernel")
        it = node.iter
        bounds = None
        if isinstance(it, ast.Call):
            f = self.visit(it.func)
            if f is range or getattr(f, "__xejit_builtin__", None) == "static_range":
                if it.keywords:
                    raise SemanticError("range() takes positional arguments only")
                args = [self.visit(a) for a in it.args]
                if f is range and any(is_runtime(a) for a in args):
                    bounds = args
                else:
                    if any(is_runtime(a) for a in args):
                        raise SemanticError("static_range bounds must be compile-time values")
                    try:
                        seq = _compile_time_call(range, args, {})
                    except SemanticError as e:   # point at the range(...) call
                        raise self.src.error(it, str(e)) from None
                    return self.unrolled(node, seq)
        if bounds is None:
            seq = self.visit(it)
            if is_runtime(seq) or isinstance(seq, (str, bytes)) or not hasattr(seq, "__iter__"):
                raise SemanticError("a kernel 'for' loops over range(...) or over a compile-time "
                                    f"tuple/list, not {type_name(seq)}")
            return self.unrolled(node, seq)
        self.runtime_for(node, bounds)

    def unrolled(self, node: ast.For, seq: Any) -> None:
        for v in seq:
            self.assign(node.target, v)
            self.visit_body(node.body)

    def runtime_for(self, node: ast.For, args: list[Any]) -> None:
        if not isinstance(node.target, ast.Name):
            raise SemanticError("the loop variable of a runtime loop must be a single name")
        if len(args) not in (1, 2, 3):
            raise SemanticError("range() takes 1 to 3 arguments")
        lb, ub, step = ([0] + args + [1])[:3] if len(args) == 1 else (args + [1])[:3]
        if isinstance(step, int) and step <= 0:
            raise SemanticError(f"runtime loops need a positive step, got {step}")
        lb, ub, step = (self.sem.to_index(x, f"range {w}") for x, w in
                        ((lb, "start"), (ub, "stop"), (step, "step")))
        # Loop-carried names: assigned in the body and live before the loop (Triton's rule,
        # found syntactically instead of by a throwaway walk).
        assigned = _assigned_names(node.body)
        carried, inits = [], []
        for name in sorted(assigned):
            if name not in self.scope or name == node.target.id:
                continue
            v = self.scope[name]
            if isinstance(v, bool) or not isinstance(v, (Value, int, float)):
                raise SemanticError(f"'{name}' holds the compile-time value {v!r} and is reassigned "
                                    f"inside a runtime loop; compile-time values cannot change "
                                    f"at runtime")
            if not is_runtime(v):
                v = self.sem.const(v, f32 if isinstance(v, float) else index, name)
            if isinstance(v.type, ArrayType):
                raise SemanticError(f"array argument '{name}' cannot be reassigned in a loop")
            carried.append(name)
            inits.append(v)
        body = Block([index] + [v.type for v in inits], [node.target.id] + carried)
        saved_scope = dict(self.scope)
        self.scope[node.target.id] = body.args[0]
        for name, arg in zip(carried, body.args[1:]):
            self.scope[name] = arg
        with self.b.insertion_point(body):
            self.visit_body(node.body)
            yields = []
            for name, init in zip(carried, inits):
                v = self.scope.get(name)
                if not is_runtime(v):
                    v = self.sem.const(v, init.type) if isinstance(v, (int, float)) else v
                if not is_runtime(v) or v.type != init.type:
                    raise SemanticError(f"loop-carried variable '{name}' changes type inside the "
                                        f"loop: {init.type} before, {type_name(v)} at the end of "
                                        f"the body; cast it with .to(...) to keep one type")
                yields.append(v)
            self.b.create("scf.yield", yields, [])
        loop = self.b.create("scf.for", [lb, ub, step, *inits], [v.type for v in inits],
                             regions=[Region([body])])
        # After the loop: carried names are the loop's results; body-only names are gone.
        self.scope = saved_scope
        for name, r in zip(carried, loop.results):
            r.name_hint = name
            self.scope[name] = r
        self.loop_locals |= {n for n in assigned if n not in saved_scope} | {node.target.id} - set(
            saved_scope)

    def visit_While(self, node: ast.While) -> None:
        raise SemanticError("'while' loops are not supported inside a kernel; use "
                            "'for k in range(start, stop, step)'")

    # --- expressions ----------------------------------------------------------------------------

    def visit_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def visit_Tuple(self, node: ast.Tuple) -> tuple:
        return tuple(self.visit(e) for e in node.elts)

    def visit_List(self, node: ast.List) -> list:
        return [self.visit(e) for e in node.elts]

    def lookup(self, name: str, node: ast.AST) -> Any:
        if name in self.scope:
            return self.scope[name]
        if name in self.loop_locals:
            raise SemanticError(f"'{name}' is defined inside a runtime loop and cannot be used "
                                f"after it; assign it before the loop to carry it")
        if name in self.globals:
            value = self.globals[name]
            where = self.cells.get(name, self.module_globals)
            if (id(where), name) not in self.reads:
                self.reads[(id(where), name)] = GlobalRead(where, name, value)
            return value
        if name in _COMPILE_TIME_BUILTINS:
            return getattr(builtins, name)
        raise SemanticError(f"undefined name '{name}'")

    def visit_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id, node)

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        obj = self.visit(node.value)
        attr = node.attr
        if is_runtime(obj):
            t = obj.type
            if isinstance(t, ArrayType):
                if attr == "dtype":
                    return t.dtype
                if attr in ("shape", "strides"):
                    op = "xejit.dim" if attr == "shape" else "xejit.stride"
                    return _ArrayDims(self.b.create(op, [obj], [index], {"dim": d}).result
                                      for d in range(t.rank))
                if attr == "ndim":
                    return t.rank
            elif isinstance(t, (VectorType, TileType, ScalarType)):
                if attr == "dtype":
                    return t.dtype if not isinstance(t, ScalarType) else t
                if attr == "shape" and not isinstance(t, ScalarType):
                    return tuple(t.shape)
                if attr == "T" and isinstance(t, VectorType):
                    return self.sem.tile_transpose(obj)
                if attr == "to" and not isinstance(t, TileType):
                    return _BoundMethod("to", obj)
            raise SemanticError(f"a value of type {t} has no attribute '{attr}'")
        if isinstance(obj, ScalarType) and attr in ("is_float", "itemsize", "bitwidth", "name"):
            return getattr(obj, attr)
        if inspect.ismodule(obj) or isinstance(obj, (Layout, tuple, int, float, str)):
            try:
                return getattr(obj, attr)
            except AttributeError:
                pass
        raise SemanticError(f"{type_name(obj)} has no attribute '{attr}'")

    def visit_Subscript(self, node: ast.Subscript) -> Any:
        obj = self.visit(node.value)
        idx = self.visit(node.slice)
        if is_runtime(obj):
            raise SemanticError("indexing a tile is not supported; tiles are used as a whole "
                                "(use tile_reduce, tile_broadcast, init_tile offsets)")
        if is_runtime(idx):
            raise SemanticError("the index of a compile-time sequence must be a constant")
        try:
            return obj[idx]
        except Exception as e:
            raise SemanticError(f"cannot index {type_name(obj)} with {idx!r}: {e}")

    def visit_Slice(self, node: ast.Slice) -> slice:
        return slice(*(None if x is None else self.visit(x) for x in (node.lower, node.upper, node.step)))

    _BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
               ast.Mod: "%", ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
               ast.LShift: "<<", ast.RShift: ">>"}

    def binop(self, op: ast.operator, a: Any, b: Any) -> Any:
        sym = self._BINOPS.get(type(op))
        if sym is None:
            raise SemanticError(f"operator {type(op).__name__} is not supported inside a kernel")
        if not is_runtime(a) and not is_runtime(b):
            return _fold(sym, a, b)
        return self.sem.binary(sym, a, b)

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        return self.binop(node.op, self.visit(node.left), self.visit(node.right))

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        v = self.visit(node.operand)
        if not is_runtime(v):
            fn = {ast.USub: lambda x: -x, ast.UAdd: lambda x: +x, ast.Not: lambda x: not x,
                  ast.Invert: lambda x: ~x}[type(node.op)]
            try:
                return fn(v)
            except (TypeError, ValueError, ArithmeticError) as e:
                raise SemanticError(f"cannot compute {type(node.op).__name__.lower()} of {v!r} at "
                                    f"compile time: {e}") from None
        if isinstance(node.op, ast.USub):
            return self.sem.unary("neg", v)
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.Invert):
            d = self.sem.dtype_of(v)   # ~x flips every bit: xor with all ones of x's type
            return self.sem.binary("^", v, -1 if d.is_signed else True if d.kind == "bool"
                                   else (1 << d.bitwidth) - 1)
        raise SemanticError("'not' needs a compile-time value; use ~mask or == 0 for runtime values")

    _CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}

    def visit_Compare(self, node: ast.Compare) -> Any:
        if len(node.ops) != 1:
            raise SemanticError("chained comparisons (a < b < c) are not supported on tiles; "
                                "combine two comparisons with &")
        a, b = self.visit(node.left), self.visit(node.comparators[0])
        op = node.ops[0]
        if not is_runtime(a) and not is_runtime(b):
            return {ast.Eq: lambda: a == b, ast.NotEq: lambda: a != b, ast.Lt: lambda: a < b,
                    ast.LtE: lambda: a <= b, ast.Gt: lambda: a > b, ast.GtE: lambda: a >= b,
                    ast.Is: lambda: a is b, ast.IsNot: lambda: a is not b,
                    ast.In: lambda: a in b, ast.NotIn: lambda: a not in b}[type(op)]()
        if type(op) not in self._CMPOPS:
            raise SemanticError(f"{type(op).__name__} is not supported on runtime values")
        return self.sem.compare(self._CMPOPS[type(op)], a, b)

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        result = None
        for v in node.values:
            result = self.visit(v)
            if is_runtime(result):
                raise SemanticError("'and'/'or' need compile-time values; use & and | on masks")
            if isinstance(node.op, ast.And) and not result:
                return result
            if isinstance(node.op, ast.Or) and result:
                return result
        return result

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.visit(node.test)
        if is_runtime(cond):
            raise SemanticError("a conditional expression needs a compile-time condition; use "
                                "xl.where(cond, a, b)")
        return self.visit(node.body if cond else node.orelse)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> str:
        parts = []
        for v in node.values:
            x = self.visit(v.value) if isinstance(v, ast.FormattedValue) else v.value
            if is_runtime(x):
                raise SemanticError("f-strings can only format compile-time values")
            parts.append(str(x))
        return "".join(parts)

    def visit_Call(self, node: ast.Call) -> Any:
        f = self.visit(node.func)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                v = self.visit(a.value)
                if is_runtime(v):
                    raise SemanticError("cannot unpack a runtime value with *")
                args.extend(v)
            else:
                args.append(self.visit(a))
        kwargs = {}
        for k in node.keywords:
            if k.arg is None:
                raise SemanticError("**kwargs is not supported inside a kernel")
            kwargs[k.arg] = self.visit(k.value)
        return self.call(f, args, kwargs, node)

    def call(self, f: Any, args: list, kwargs: dict, node: ast.Call) -> Any:
        if isinstance(f, _BoundMethod):
            if f.name == "to":
                return self.sem.cast(f.obj, *args, **kwargs)
        name = getattr(f, "__xejit_builtin__", None)
        if name is not None:
            return self.builtin(name, args, kwargs, node)
        if getattr(f, "__xejit_compile_time__", False):
            _no_runtime(f, args, kwargs)
            return _compile_time_call(f, args, kwargs)
        inner = getattr(f, "fn", None) if hasattr(f, "__xejit_kernel__") else None
        if getattr(f, "__xejit_inline__", False) or inner is not None:
            return self.inline(inner or f, args, kwargs)
        if f is breakpoint:
            names = [n for n, v in self.scope.items() if is_runtime(v)
                     and not isinstance(v.type, ArrayType)]
            self.b.create("xejit.breakpoint", [self.scope[n] for n in names], [], {"names": names})
            return None
        if f is print:
            return self.builtin("device_print", args, kwargs, node)
        if f in (min, max) and any(is_runtime(a) for a in args):
            if len(args) != 2 or kwargs:
                raise SemanticError(f"{f.__name__}() of runtime values takes two arguments")
            return self.sem.binary(f.__name__, *args)
        if f is abs and args and is_runtime(args[0]):
            return self.sem.unary("abs", args[0])
        if f is float and args and is_runtime(args[0]):
            return self.sem.cast(args[0], f32)
        if f is int and args and is_runtime(args[0]):
            return self.sem.cast(args[0], index)
        if (inspect.isbuiltin(f) or f in vars(builtins).values() or getattr(f, "__module__", "")
                == "math") and not isinstance(f, type(lambda: 0)):
            if getattr(f, "__name__", "") not in _COMPILE_TIME_BUILTINS and \
                    getattr(f, "__module__", "") != "math":
                raise SemanticError(f"calling {getattr(f, '__name__', f)}() is not supported "
                                    f"inside a kernel")
            _no_runtime(f, args, kwargs)
            return _compile_time_call(f, args, kwargs)
        raise SemanticError(f"cannot call {getattr(f, '__name__', type_name(f))} inside a kernel; "
                            f"only xejit.language functions, @xl.inline helpers and compile-time "
                            f"builtins can be called")

    def inline(self, f: Callable, args: list, kwargs: dict) -> Any:
        if self.depth > 32:
            raise SemanticError(f"inlining {f.__name__} recursed too deeply")
        try:
            src, fdef = SourceInfo.of(f)
        except CompilationError as e:   # no source: point at the call in the kernel
            raise SemanticError(e.message) from None
        try:
            bound = inspect.signature(f).bind(*args, **kwargs)
        except TypeError as e:
            raise SemanticError(f"bad call to {f.__name__}: {e}")
        bound.apply_defaults()
        gen = CodeGenerator(f, self.b, dict(bound.arguments), src, fdef, self.depth + 1, self.reads)
        body = fdef.body
        for i, s in enumerate(body):
            if isinstance(s, ast.Return) and i != len(body) - 1:
                raise src.error(s, "an inlined helper may only 'return' as its last statement")
        try:
            gen.visit_body(body)
        except _Return as r:
            return r.value
        return None

    def builtin(self, name: str, args: list, kwargs: dict, node: ast.Call) -> Any:
        sem = self.sem
        try:
            if name == "cdiv":
                a, b = args
                if not is_runtime(a) and not is_runtime(b):
                    return _fold("-", 0, _fold("//", _fold("-", 0, a), b))
                return sem.binary("//", sem.binary("-", sem.binary("+", a, b), 1), b)
            if name in ("program_id", "num_programs"):
                axis = kwargs.get("axis", args[0] if args else None)
                if axis not in (0, 1, 2):
                    raise SemanticError(f"{name} axis must be 0, 1 or 2, got {axis!r}")
                return self.b.create(f"xejit.{name}", [], [index], {"axis": axis}).result
            if name == "static_range":
                _no_runtime(range, args, kwargs)
                return _compile_time_call(range, args, kwargs)
            if name in ("zeros",):
                return sem.full(kwargs.pop("shape", args[0] if args else None), 0,
                                kwargs.get("dtype", args[1] if len(args) > 1 else f32))
            if name == "full":
                return sem.full(*args, **kwargs)
            if name in ("sum", "max", "min") and (len(args) >= 2 or "axis" in kwargs):
                axis = kwargs.get("axis", args[1] if len(args) > 1 else None)
                kind = {"sum": "add"}.get(name, name)
                return sem.tile_reduce(args[0], kind, axis)
            if name in ("maximum", "minimum"):
                return sem.binary(name[:3], *args)
            if name == "where":
                return sem.where(*args)
            if name == "cast":
                return sem.cast(*args, **kwargs)
            if name in Semantic._UNARY or name == "abs":
                return sem.unary(name, *args)
            if name == "device_print":
                prefix = args[0] if args and isinstance(args[0], str) else ""
                vals = args[1:] if args and isinstance(args[0], str) else args
                rt = [v for v in vals if is_runtime(v)]
                names = [ast.unparse(a) for a, v in zip(node.args[len(args) - len(vals):], vals)
                         if is_runtime(v)]
                self.b.create("xejit.print", rt, [], {"prefix": prefix, "names": names})
                return None
            impl = getattr(sem, name, None)
            if impl is None:
                raise SemanticError(f"xl.{name} is not supported here")
            return impl(*args, **kwargs)
        except TypeError as e:
            msg = str(e)
            if "argument" not in msg:
                raise
            raise SemanticError(f"bad arguments to xl.{name}: {msg.split(') ', 1)[-1]}") from None


def _compile_time_call(f: Callable, args: list, kwargs: dict) -> Any:
    """Call a compile-time function (``range``, ``min``, ``math.*``, ``xl.wg_map``, ...) on
    compile-time values; its failure is the kernel's mistake (``range(2.5)``), not the compiler's."""
    try:
        return f(*args, **kwargs)
    except (TypeError, ValueError, ArithmeticError, LookupError, AttributeError) as e:
        shown = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
        raise SemanticError(f"{getattr(f, '__name__', f)}({shown}) failed at compile time: "
                            f"{type(e).__name__}: {e}") from None


def _no_runtime(f: Any, args: list, kwargs: dict) -> None:
    if any(is_runtime(a) for a in list(args) + list(kwargs.values())):
        raise SemanticError(f"{getattr(f, '__name__', f)}() needs compile-time arguments")


def _fold(sym: str, a: Any, b: Any) -> Any:
    ops = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
           "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "&": operator.and_,
           "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift}
    try:
        return ops[sym](a, b)
    except Exception as e:
        raise SemanticError(f"cannot compute {a!r} {sym} {b!r} at compile time: {e}")


def _assigned_names(stmts: Sequence[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names.add(n.id)
    return names


_HINTS = {
    "Lambda": " (define an @xl.inline helper instead)",
    "ListComp": " (use a compile-time 'for' loop)",
    "GeneratorExp": " (use a compile-time 'for' loop)",
    "DictComp": "", "SetComp": "",
    "Try": " (kernels cannot catch exceptions)",
    "With": "", "ClassDef": "", "FunctionDef": " (define helpers outside the kernel with @xl.inline)",
    "Global": "", "Nonlocal": "", "Delete": "", "Raise": " (use a compile-time assert)",
    "Break": " (loops run their full range)", "Continue": " (use xl.where to skip work)",
    "Dict": "", "Set": "", "Await": "", "Yield": "", "NamedExpr": "",
}


_MISSING = object()


class GlobalRead:
    """A module global or closure variable read at compile time, with the value it had.

    ``unchanged()`` says whether it still has that value: the same object, or for numbers,
    strings and (nested) tuples / lists / dicts of them, an equal value (lists are compared by
    content, so an in-place change counts). Attributes of the object (``cfg.BLOCK``) are not
    tracked, only the name's binding."""
    __slots__ = ("scope", "name", "value", "frozen")

    def __init__(self, scope: Any, name: str, value: Any):
        self.scope, self.name, self.value = scope, name, value
        self.frozen = _freeze(value)

    def current(self) -> Any:
        if isinstance(self.scope, dict):
            return self.scope.get(self.name, _MISSING)
        try:
            return self.scope.cell_contents
        except ValueError:
            return _MISSING

    def unchanged(self) -> bool:
        cur = self.current()
        if cur is self.value and not isinstance(cur, (list, dict)):
            return True
        return _freeze(cur) == self.frozen

    def __repr__(self) -> str:
        return f"GlobalRead({self.name}={self.value!r})"


_PLAIN = (bool, int, float, complex, str, bytes, type(None))


def _freeze(v: Any) -> Any:
    """A comparable snapshot: values for plain data, identity for everything else."""
    if isinstance(v, float) and v != v:
        return (float, "nan")
    if isinstance(v, _PLAIN):
        return (type(v), v)
    if isinstance(v, (list, tuple)):
        return (type(v), tuple(_freeze(x) for x in v))
    if isinstance(v, dict):
        return (dict, tuple((_freeze(k), _freeze(x)) for k, x in v.items()))
    return ("object", id(v))


@dataclass
class Param:
    """A kernel parameter as the frontend sees it: a compile-time value or a runtime type."""
    name: str
    type: Type | None = None
    value: Any = None

    @property
    def is_constexpr(self) -> bool:
        return self.type is None


def build_module(fn: Callable, params: Sequence[Param], attributes: dict[str, Any] | None = None,
                 verify: bool = True, global_reads: list | None = None) -> Module:
    """Translate a kernel into a verified XeTile IR module.

    ``global_reads``, when given, receives a :class:`GlobalRead` for each module global or
    closure variable the kernel (or a helper it inlines) read while being translated.

    Example:
        >>> from xejit.ir.core import ArrayType, f32, index
        >>> def k(x, n, B):
        ...     pass
        >>> m = build_module(k, [Param("x", ArrayType(f32, 2)), Param("n", index), Param("B", value=4)])
        >>> m.functions[0].name
        'k'
    """
    src, fdef = SourceInfo.of(fn)
    rt = [p for p in params if not p.is_constexpr]
    func = Function(fn.__name__, [p.type for p in rt], [p.name for p in rt], attributes,
                    src.loc(fdef, fdef.name))
    scope: dict[str, Any] = {p.name: p.value for p in params if p.is_constexpr}
    scope.update({p.name: a for p, a in zip(rt, func.args)})
    builder = Builder.at_end(func.entry)
    gen = CodeGenerator(fn, builder, scope, src, fdef)
    gen.visit_body(fdef.body)
    if global_reads is not None:
        global_reads.extend(gen.reads.values())
    builder.loc = src.loc(fdef, fdef.name)
    builder.create("func.return")
    _infer_num_subgroups(func)
    if verify:
        try:
            verify_function(func)
        except IRVerificationError as e:
            loc = e.op.loc if e.op is not None else func.loc
            msg = str(e).split("\n  at ")[0]
            raise CompilationError(msg, file=loc.file, line=loc.line, col=loc.col,
                                   source_line=linecache.getline(loc.file, loc.line) or None) from None
    return Module([func])


def _infer_num_subgroups(func: Function) -> None:
    """num_subgroups=None means: take it from the kernel's layouts (1 if it has none)."""
    if func.attributes.get("num_subgroups") is not None:
        return
    n = 1
    for op in func.walk():
        lays = [r.type.layout for r in op.results if isinstance(r.type, TileType)]
        lays += [op.attributes.get("layout")]
        for lay in lays:
            if isinstance(lay, Layout) and lay.sg_layout is not None:
                n = lay.num_subgroups
                break
        else:
            continue
        break
    func.attributes["num_subgroups"] = n


