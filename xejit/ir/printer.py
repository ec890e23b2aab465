"""MLIR-like text for the IR, close to the XeTile RFC's examples.

Values get short readable names from their Python variable (``%acc``, ``%ta_1``) or a counter.

Example:
    >>> from xejit.ir.core import Builder, Function, index
    >>> fn = Function("k", [index], ["n"])
    >>> _ = Builder.at_end(fn.entry).create("func.return")
    >>> print(print_function(fn))
    func.func @k(%n: index) {
      func.return
    }
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:   # core prints modules with this printer, so no import of core at run time
    from .core import Block, Function, Module, Operation, Value


class Namer:
    """Gives every value a unique printable name (a naming context, as in JAX's pp)."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.used: set[str] = set()
        self.counter = 0
        self.lines: dict[int, int] = {}  # id(op) -> output line, filled while printing

    def __call__(self, v: Value) -> str:
        key = id(v)
        if key not in self.names:
            base = v.name_hint
            if base and base.isidentifier():
                name, i = base, 1
                while name in self.used:
                    name, i = f"{base}_{i}", i + 1
            else:
                while str(self.counter) in self.used:
                    self.counter += 1
                name = str(self.counter)
                self.counter += 1
            self.used.add(name)
            self.names[key] = name
        return "%" + self.names[key]


def format_attr(a: Any) -> str:
    if isinstance(a, bool):
        return "true" if a else "false"
    if isinstance(a, float):
        return repr(a)
    if isinstance(a, (list, tuple)):
        return "[" + ", ".join(format_attr(x) for x in a) + "]"
    if isinstance(a, str):
        return f'"{a}"'
    return str(a)   # ints, layouts (their __str__ is their syntax)


def _print_for(op: Operation, nm: Namer, indent: str, out: list[str]) -> None:
    lb, ub, step, *inits = op.operands
    body = op.regions[0].block
    iv, *iters = body.args
    res = ""
    if op.results:
        res = ", ".join(nm(r) for r in op.results) + " = "
    text = f"{indent}{res}scf.for {nm(iv)} = {nm(lb)} to {nm(ub)} step {nm(step)}"
    if inits:
        pairs = ", ".join(f"{nm(a)} = {nm(v)}" for a, v in zip(iters, inits))
        text += f" iter_args({pairs}) -> ({', '.join(str(r.type) for r in op.results)})"
    out.append(text + " {")
    _print_block(body, nm, indent + "  ", out)
    out.append(indent + "}")


def print_op(op: Operation, nm: Namer, indent: str, out: list[str]) -> None:
    """Append the text of one op (and its regions) to ``out``."""
    nm.lines[id(op)] = len(out)
    if op.name == "scf.for":
        return _print_for(op, nm, indent, out)
    res = ", ".join(nm(r) for r in op.results)
    text = f"{indent}{res + ' = ' if res else ''}{op.name}"
    if op.name in ("xetile.tile_reduce", "xetile.atomic_rmw_tile"):
        text += f" <{op.attributes['kind']}>"
    if op.name == "arith.constant":
        text += " " + format_attr(op.attributes["value"])
    if op.operands:
        text += " " + ", ".join(nm(v) for v in op.operands)
    attrs = {k: v for k, v in op.attributes.items() if not (k == "kind" and op.name in (
        "xetile.tile_reduce", "xetile.atomic_rmw_tile")) and not (k == "value" and op.name ==
        "arith.constant")}
    if attrs:
        text += " {" + ", ".join(f"{k} = {format_attr(v)}" for k, v in attrs.items()) + "}"
    types_in = ", ".join(str(v.type) for v in op.operands)
    types_out = ", ".join(str(r.type) for r in op.results)
    all_types = {v.type for v in op.operands} | {r.type for r in op.results}
    if op.operands and op.results and len(all_types) == 1:
        text += f" : {op.results[0].type}"
    elif types_in or types_out:
        text += " : " + types_in
        if types_out:
            text += (" -> " if types_in else "") + types_out
    out.append(text)
    for r in op.regions:
        out[-1] += " {"
        for b in r.blocks:
            _print_block(b, nm, indent + "  ", out)
        out.append(indent + "}")


def _print_block(block: Block, nm: Namer, indent: str, out: list[str]) -> None:
    for op in block.ops:
        print_op(op, nm, indent, out)


def print_function(fn: Function, namer: Namer | None = None) -> str:
    nm = namer or Namer()
    args = ", ".join(f"{nm(a)}: {a.type}" for a in fn.args)
    attrs = {k: v for k, v in fn.attributes.items() if v is not None}
    attr_text = (" attributes {" + ", ".join(f"{k} = {format_attr(v)}" for k, v in attrs.items())
                 + "}") if attrs else ""
    out = [f"func.func @{fn.name}({args}){attr_text} {{"]
    _print_block(fn.entry, nm, "  ", out)
    out.append("}")
    return "\n".join(out)


def print_module(mod: Module) -> str:
    return "\n\n".join(print_function(f) for f in mod.functions)


def print_around(fn: Function, target: Operation, context: int = 3) -> str:
    """The function's text with the failing op marked, a few lines around it (for errors)."""
    nm = Namer()
    lines = print_function(fn, nm).split("\n")
    if id(target) not in nm.lines:
        return "\n".join(lines)
    i = nm.lines[id(target)] + 1  # +1: the func.func header line
    lo, hi = max(0, i - context), min(len(lines), i + context + 1)
    return "\n".join(("=> " if j == i else "   ") + lines[j] for j in range(lo, hi))
