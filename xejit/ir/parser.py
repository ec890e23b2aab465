"""Reads the printer's text back into IR: ``parse_function(print_function(fn))`` is ``fn``.

The syntax is the one :mod:`xejit.ir.printer` writes (MLIR-like, close to the XeTile RFC), so
IR can be written by hand for text tests of the passes (``python -m xejit opt``, checked with
the ``filecheck`` package, as LLVM and xDSL test theirs). Source locations are not printed and
so not read back. Errors are :class:`ParseError` (a ``ValueError``) naming line and column.

Example:
    >>> fn = parse_function('''
    ... func.func @k(%n: index) attributes {num_subgroups = 1} {
    ...   %0 = arith.constant 2 : index
    ...   %m = arith.muli %n, %0 : index
    ...   func.return
    ... }''')
    >>> [op.name for op in fn.entry.ops]
    ['arith.constant', 'arith.muli', 'func.return']
    >>> from xejit.ir.printer import print_function
    >>> print(print_function(fn).splitlines()[2])
      %m = arith.muli %n, %0 : index
"""
from __future__ import annotations

import re
from typing import Any

from ..errors import XejitValueError
from . import gpu, xegpu, xetile  # noqa: F401  (registers the ops the text may name)
from .core import (
    SCALAR_TYPES,
    ArrayType,
    Block,
    Function,
    Layout,
    Module,
    Operation,
    Region,
    TileType,
    Type,
    Value,
    VectorType,
    verify_op_signature,
)
from .gpu import SlmType
from .xegpu import TensorDescType, nbarrier

__all__ = ["ParseError", "parse_function", "parse_module", "parse_type"]

# Ops whose first token after the name is an attribute the printer writes in a special place.
_KIND_IN_ANGLES = ("xetile.tile_reduce", "xetile.atomic_rmw_tile")
_LAYOUT_PREFIXES = ("#xetile.wg_map<", "#xegpu.layout<")


class ParseError(XejitValueError):
    """The text is not IR in the printer's syntax."""


class _Cursor:
    """A position in the text with the few reads a recursive-descent parser needs."""

    _SPACE = re.compile(r"(?:\s|//[^\n]*)*")

    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def error(self, message: str) -> ParseError:
        line = self.text.count("\n", 0, self.pos) + 1
        col = self.pos - (self.text.rfind("\n", 0, self.pos) + 1) + 1
        src = self.text.splitlines()[line - 1] if self.text.splitlines()[line - 1:line] else ""
        return ParseError(f"line {line}:{col}: {message}\n  {src}\n  {' ' * (col - 1)}^")

    def skip(self) -> None:
        self.pos = self._SPACE.match(self.text, self.pos).end()

    def peek(self, s: str) -> bool:
        self.skip()
        return self.text.startswith(s, self.pos)

    def accept(self, s: str) -> bool:
        if self.peek(s):
            self.pos += len(s)
            return True
        return False

    def peek_inline(self, s: str) -> bool:
        """``s`` follows on the same line (an op's operands, attributes and types do)."""
        self.pos = re.compile(r"[ \t]*").match(self.text, self.pos).end()
        return self.text.startswith(s, self.pos)

    def expect(self, s: str) -> None:
        if not self.accept(s):
            raise self.error(f"expected '{s}'")

    def regex(self, pattern: str, what: str) -> str:
        self.skip()
        m = re.compile(pattern).match(self.text, self.pos)
        if m is None:
            raise self.error(f"expected {what}")
        self.pos = m.end()
        return m.group(0)

    def bracketed(self) -> str:
        """The text up to the ``>`` closing an already consumed ``<`` (nested ``<>`` kept)."""
        depth, start = 1, self.pos
        while self.pos < len(self.text):
            c = self.text[self.pos]
            depth += (c == "<") - (c == ">" and self.text[self.pos - 1] != "-")
            self.pos += 1
            if depth == 0:
                return self.text[start:self.pos - 1]
        raise self.error("unclosed '<'")


# --- types and attributes ----------------------------------------------------------------------

_SHAPE = re.compile(r"((?:\d+x)*)x?(\w+)$")


def _split_top(text: str) -> list[str]:
    """Split at commas outside ``<>``, ``[]`` and ``()``."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "<[(":
            depth += 1
        elif c in ">])" and not (c == ">" and text[i - 1] == "-"):
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    return parts + [tail] if tail or parts else parts


def _shape_and_dtype(body: str) -> tuple[tuple[int, ...], Any]:
    m = _SHAPE.match(body.strip())
    if m is None or m.group(2) not in SCALAR_TYPES:
        raise ValueError(f"bad shape and element type '{body}'")
    dims = tuple(int(d) for d in m.group(1).split("x") if d)
    return dims, SCALAR_TYPES[m.group(2)]


def _int_list(text: str) -> tuple[int, ...]:
    text = text.strip()
    if not (text.startswith("[") and text.endswith("]")):
        raise ValueError(f"expected a list of integers, got '{text}'")
    return tuple(int(x) for x in text[1:-1].split(",") if x.strip())


def _key_values(text: str) -> dict[str, str]:
    out = {}
    for part in _split_top(text):
        key, sep, value = part.partition("=")
        out[key.strip()] = value.strip() if sep else "true"
    return out


def _layout(text: str) -> Layout:
    for prefix in _LAYOUT_PREFIXES:
        if text.startswith(prefix) and text.endswith(">"):
            fields = _key_values(text[len(prefix):-1])
            unknown = set(fields) - set(Layout.FIELDS)
            if unknown:
                raise ValueError(f"unknown layout field(s) {sorted(unknown)}")
            return Layout(**{k: _int_list(v) for k, v in fields.items()})
    raise ValueError(f"expected a layout, got '{text}'")


def parse_type(text: str) -> Type:
    """One type in the printer's spelling: ``parse_type('vector<8x16xf16>')``."""
    text = text.strip()
    if text in SCALAR_TYPES:
        return SCALAR_TYPES[text]
    if text == "!xegpu.nbarrier":
        return nbarrier
    head, sep, rest = text.partition("<")
    if not sep or not rest.endswith(">"):
        raise ValueError(f"unknown type '{text}'")
    parts = _split_top(rest[:-1])
    if head == "vector":
        return VectorType(*_shape_and_dtype(parts[0]))
    if head == "memref":
        if parts[1:] == ["slm"]:
            return SlmType(*_shape_and_dtype(parts[0]))
        dims, dtype = _shape_and_dtype(parts[0].replace("?", "1"))
        rank = len(dims)
        extra = _key_values(", ".join(parts[1:]))
        order = _int_list(extra.pop("order")) if "order" in extra else tuple(range(rank - 1, -1, -1))
        aligned = extra.pop("unaligned", None) is None
        if extra:
            raise ValueError(f"unknown memref attribute(s) {sorted(extra)}")
        return ArrayType(dtype, rank, order, aligned)
    if head == "!xetile.tile":
        shape, dtype = _shape_and_dtype(parts[0])
        kw: dict[str, Any] = {}
        if len(parts) > 1:
            attr = parts[1]
            if not (attr.startswith("#xetile.tile_attr<") and attr.endswith(">")):
                raise ValueError(f"unknown tile attribute '{attr}'")
            for k, v in _key_values(attr[len("#xetile.tile_attr<"):-1]).items():
                if k == "order":
                    kw["order"] = _int_list(v)
                elif k == "wg":
                    kw["layout"] = _layout(v)
                elif k == "scatter":
                    kw["scatter"] = v == "true"
                else:
                    raise ValueError(f"unknown tile attribute '{k}'")
        return TileType(shape, dtype, **kw)
    if head == "!xegpu.tensor_desc":
        shape, dtype = _shape_and_dtype(parts[0])
        kw = {}
        for attr in parts[1:]:
            if attr == "#xegpu.scatter_tdesc_attr<>":
                kw["scattered"] = True
            elif attr.startswith("#xegpu.block_tdesc_attr<"):
                for k, v in _key_values(attr[len("#xegpu.block_tdesc_attr<"):-1]).items():
                    if k == "array_length":
                        kw["array_length"] = int(v)
                    elif k == "boundary_check":
                        kw["boundary_check"] = v == "true"
                    else:
                        raise ValueError(f"unknown tensor_desc attribute '{k}'")
            else:
                kw["layout"] = _layout(attr)
        return TensorDescType(shape, dtype, **kw)
    raise ValueError(f"unknown type '{text}'")


_NUMBER = r"-?(?:inf|nan|\d+\.\d*(?:e[-+]?\d+)?|\d+e[-+]?\d+|\d+)"


def _attr_value(cur: _Cursor) -> Any:
    if cur.peek("#"):
        start = cur.pos
        cur.regex(r"#[\w.]+<", "a layout")
        cur.bracketed()
        try:
            return _layout(cur.text[start:cur.pos])
        except ValueError as e:
            cur.pos = start
            raise cur.error(str(e)) from None
    if cur.accept("["):
        items = []
        while not cur.accept("]"):
            if items:
                cur.expect(",")
            items.append(_attr_value(cur))
        return items
    if cur.peek('"'):
        return cur.regex(r'"[^"]*"', "a string")[1:-1]
    if cur.accept("true"):
        return True
    if cur.accept("false"):
        return False
    tok = cur.regex(_NUMBER, "an attribute value")
    return float(tok) if any(c in tok for c in ".en") or "inf" in tok else int(tok)


def _attr_dict(cur: _Cursor) -> dict[str, Any]:
    cur.expect("{")
    attrs: dict[str, Any] = {}
    while not cur.accept("}"):
        if attrs:
            cur.expect(",")
        key = cur.regex(r"[A-Za-z_]\w*", "an attribute name")
        cur.expect("=")
        attrs[key] = _attr_value(cur)
    return attrs


def _type(cur: _Cursor) -> Type:
    cur.skip()
    start = cur.pos
    m = re.compile(r"!?[\w.]+").match(cur.text, cur.pos)
    if m is None:
        raise cur.error("expected a type")
    cur.pos = m.end()
    if cur.text.startswith("<", cur.pos):
        cur.pos += 1
        cur.bracketed()
    try:
        return parse_type(cur.text[start:cur.pos])
    except ValueError as e:
        cur.pos = start
        raise cur.error(str(e)) from None


def _type_list(cur: _Cursor) -> list[Type]:
    types = [_type(cur)]
    while cur.accept(","):
        types.append(_type(cur))
    return types


# --- functions and ops -------------------------------------------------------------------------

_NAME = r"%[\w.]+"


class _FunctionParser:
    def __init__(self, cur: _Cursor):
        self.cur = cur
        self.values: dict[str, Value] = {}

    def define(self, name: str, v: Value) -> None:
        if name in self.values:
            raise self.cur.error(f"{name} is defined twice")
        hint = name[1:]
        v.name_hint = None if hint.isdigit() else hint
        self.values[name] = v

    def new_name(self, what: str) -> str:
        """A name about to be defined (checked here, so an error points at it)."""
        name = self.cur.regex(_NAME, what)
        if name in self.values:
            self.cur.pos -= len(name)
            raise self.cur.error(f"{name} is defined twice")
        return name

    def use(self) -> Value:
        name = self.cur.regex(_NAME, "a value (%name)")
        if name not in self.values:
            self.cur.pos -= len(name)
            raise self.cur.error(f"use of undefined value {name}")
        return self.values[name]

    def function(self) -> Function:
        cur = self.cur
        cur.expect("func.func")
        name = cur.regex(r"@[\w.]+", "a function name (@name)")[1:]
        cur.expect("(")
        arg_names, arg_types = [], []
        while not cur.accept(")"):
            if arg_names:
                cur.expect(",")
            arg_names.append(cur.regex(_NAME, "an argument (%name)"))
            cur.expect(":")
            arg_types.append(_type(cur))
        attrs = _attr_dict(cur) if cur.accept("attributes") else {}
        fn = Function(name, arg_types, [n[1:] for n in arg_names], attrs)
        for n, a in zip(arg_names, fn.args):
            self.define(n, a)
        cur.expect("{")
        self.block(fn.entry)
        return fn

    def block(self, block: Block) -> None:
        while not self.cur.accept("}"):
            if self.cur.pos >= len(self.cur.text):
                raise self.cur.error("unexpected end of text: missing '}'")
            self.op(block)

    def op(self, block: Block) -> None:
        cur = self.cur
        results: list[str] = []
        if cur.peek("%"):
            results.append(self.new_name("a result"))
            while cur.accept(","):
                results.append(self.new_name("a result"))
            cur.expect("=")
        start = cur.pos
        name = cur.regex(r"[A-Za-z_][\w]*\.[\w.]+", "an op name")
        if name == "scf.for":
            op = self.for_op(results)
        else:
            op = self.generic_op(name, results)
        block.append(op)
        try:
            verify_op_signature(op)
        except ValueError as e:
            cur.pos = start
            raise cur.error(str(e)) from None

    def generic_op(self, name: str, results: list[str]) -> Operation:
        cur = self.cur
        attrs: dict[str, Any] = {}
        if name in _KIND_IN_ANGLES:
            cur.expect("<")
            attrs["kind"] = cur.regex(r"\w+", "a kind")
            cur.expect(">")
        if name == "arith.constant" and cur.peek_inline(""):
            attrs["value"] = _attr_value(cur)
        operands: list[Value] = []
        if cur.peek_inline("%"):
            operands.append(self.use())
            while cur.peek_inline(",") and cur.accept(","):
                operands.append(self.use())
        if cur.peek_inline("{"):
            attrs.update(_attr_dict(cur))
        in_types: list[Type] = []
        out_types: list[Type] = []
        if cur.peek_inline(":") and cur.accept(":"):
            if not cur.peek("->"):
                in_types = _type_list(cur)
            if cur.accept("->"):
                out_types = _type_list(cur)
            elif operands and results and len(in_types) == 1:
                out_types = in_types * len(results)
                in_types = in_types * len(operands)
            elif not operands:
                in_types, out_types = [], in_types
        if len(out_types) != len(results):
            raise cur.error(f"{name}: {len(results)} result(s) but {len(out_types)} result type(s)")
        if in_types and [v.type for v in operands] != in_types:
            raise cur.error(f"{name}: operand types differ from the types written")
        op = Operation(name, operands, out_types, attrs)
        for r_name, r in zip(results, op.results):
            self.define(r_name, r)
        return op

    def for_op(self, results: list[str]) -> Operation:
        cur = self.cur
        iv = cur.regex(_NAME, "the induction variable")
        cur.expect("=")
        lb = self.use()
        cur.expect("to")
        ub = self.use()
        cur.expect("step")
        step = self.use()
        iter_names: list[str] = []
        inits: list[Value] = []
        if cur.accept("iter_args"):
            cur.expect("(")
            while not cur.accept(")"):
                if iter_names:
                    cur.expect(",")
                iter_names.append(cur.regex(_NAME, "an iter_arg"))
                cur.expect("=")
                inits.append(self.use())
            cur.expect("->")
            cur.expect("(")
            types = _type_list(cur)
            cur.expect(")")
            if len(types) != len(inits):
                raise cur.error("scf.for: iter_args and result types differ in number")
        body = Block([lb.type] + [v.type for v in inits])
        self.define(iv, body.args[0])
        for n, a in zip(iter_names, body.args[1:]):
            self.define(n, a)
        cur.expect("{")
        self.block(body)
        op = Operation("scf.for", [lb, ub, step, *inits], [v.type for v in inits], {}, [Region([body])])
        if len(results) != len(op.results):
            raise cur.error(f"scf.for: {len(results)} result name(s) for {len(op.results)} iter_args")
        for r_name, r in zip(results, op.results):
            self.define(r_name, r)
        return op


def parse_function(text: str) -> Function:
    """One ``func.func`` in the printer's syntax (``//`` comments allowed)."""
    cur = _Cursor(text)
    fn = _FunctionParser(cur).function()
    cur.skip()
    if cur.pos != len(text):
        raise cur.error("text after the function")
    return fn


def parse_module(text: str) -> Module:
    """Every ``func.func`` in the text, in order."""
    cur = _Cursor(text)
    fns = []
    while True:
        cur.skip()
        if cur.pos == len(text):
            return Module(fns)
        fns.append(_FunctionParser(cur).function())
