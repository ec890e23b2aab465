"""Dialect-agnostic SSA IR core: types, attributes, values, operations, blocks, regions, builder.

Every dialect (XeTile here, XeGPU later) is a set of :class:`OpDef` records registered with
:func:`register_op`; the structures below know nothing about any particular op.

Example:
    >>> from xejit.ir.core import Builder, Function, f32, VectorType
    >>> fn = Function("k", [], [])
    >>> b = Builder.at_end(fn.entry)
    >>> c = b.create("arith.constant", [], [VectorType((2, 2), f32)], {"value": 0.0}).result
    >>> str(c.type)
    'vector<2x2xf32>'
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import numpy as np

# xejit's errors: a leaf module without imports (the only thing this package takes from the rest
# of xejit), so that IR errors are XejitErrors too.
from ..errors import VerifyError
from .printer import print_module

# ----------------------------------------------------------------------------------------------
# Types
# ----------------------------------------------------------------------------------------------


class Type:
    """Base of all IR types (immutable, compared by value)."""


@dataclass(frozen=True)
class ScalarType(Type):
    """An element / scalar type. ``kind`` is "float", "int" (signed), "uint" or "bool"/"index".

    bf16 has no numpy dtype: the interpreter holds bf16 *values* as float32 rounded to bf16
    precision (round-to-nearest-even on the upper 16 bits, see :func:`round_to_bf16`) and bf16
    *memory* as uint16 bit patterns.
    """
    name: str
    bitwidth: int
    kind: str

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"xejit.{self.name}"

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:  # includes index and i1
        return self.kind in ("int", "uint", "index", "bool")

    @property
    def is_signed(self) -> bool:
        return self.kind in ("int", "index")

    @property
    def itemsize(self) -> int:
        return max(1, self.bitwidth // 8)

    @property
    def np_dtype(self) -> np.dtype:
        """numpy dtype of a *value* of this type in the interpreter (bf16 -> float32)."""
        return _NP_VALUE[self.name]

    @property
    def np_storage_dtype(self) -> np.dtype:
        """numpy dtype of this type in *memory* (bf16 -> uint16 bit patterns)."""
        return np.dtype(np.uint16) if self.name == "bf16" else _NP_VALUE[self.name]


bf16 = ScalarType("bf16", 16, "float")
f16 = ScalarType("f16", 16, "float")
f32 = ScalarType("f32", 32, "float")
i1 = ScalarType("i1", 1, "bool")
i8 = ScalarType("i8", 8, "int")
u8 = ScalarType("u8", 8, "uint")
i32 = ScalarType("i32", 32, "int")
i64 = ScalarType("i64", 64, "int")
index = ScalarType("index", 64, "index")

SCALAR_TYPES: dict[str, ScalarType] = {t.name: t for t in (bf16, f16, f32, i1, i8, u8, i32, i64, index)}
_NP_VALUE = {"bf16": np.dtype(np.float32), "f16": np.dtype(np.float16), "f32": np.dtype(np.float32),
             "i1": np.dtype(np.bool_), "i8": np.dtype(np.int8), "u8": np.dtype(np.uint8),
             "i32": np.dtype(np.int32), "i64": np.dtype(np.int64), "index": np.dtype(np.int64)}
_FROM_NP = {np.dtype(np.float16): f16, np.dtype(np.float32): f32, np.dtype(np.bool_): i1,
            np.dtype(np.int8): i8, np.dtype(np.uint8): u8, np.dtype(np.int32): i32,
            np.dtype(np.int64): i64}


def scalar_type_from_numpy(dtype: Any) -> ScalarType:
    """The ScalarType of a numpy dtype (raises KeyError for unsupported dtypes); ml_dtypes'
    ``bfloat16`` (numpy's bf16, as JAX and torch bf16 views use it) is bf16."""
    d = np.dtype(dtype)
    t = _FROM_NP.get(d)
    if t is None:
        if d.name == "bfloat16" and d.itemsize == 2 and d.kind == "V":
            return bf16
        raise KeyError(d)
    return t


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a dtype name, ``"bfloat16"`` included (ml_dtypes', imported on first use)."""
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def round_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 values to bf16 precision (nearest-even), returned as float32."""
    return bf16_bits_to_f32(f32_to_bf16_bits(x))


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> uint16 bf16 bit patterns, round-to-nearest-even; NaN stays a quiet NaN."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, np.uint32(0x7FC0), rounded).astype(np.uint16)


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def _shape_str(shape: Sequence[int]) -> str:
    return "x".join(str(s) for s in shape)


@dataclass(frozen=True)
class VectorType(Type):
    """A value held in registers: the data of a (workgroup-level) tile. ``vector<64x32xbf16>``."""
    shape: tuple[int, ...]
    dtype: ScalarType

    def __str__(self) -> str:
        return f"vector<{_shape_str(self.shape)}x{self.dtype}>"


@dataclass(frozen=True)
class Layout:
    """Distribution of a tile over subgroups and lanes (``#xegpu.layout``; ``wg_map`` when only
    ``sg_layout``/``sg_data`` are set). All fields are tuples of ints or None.
    ``order`` linearizes sg_layout/lane_layout to ids; the first entry is the fastest dim.
    """
    sg_layout: tuple[int, ...] | None = None
    sg_data: tuple[int, ...] | None = None
    inst_data: tuple[int, ...] | None = None
    lane_layout: tuple[int, ...] | None = None
    lane_data: tuple[int, ...] | None = None
    order: tuple[int, ...] | None = None

    FIELDS = ("sg_layout", "sg_data", "inst_data", "lane_layout", "lane_data", "order")

    def fields(self) -> dict[str, tuple[int, ...]]:
        return {f: getattr(self, f) for f in self.FIELDS if getattr(self, f) is not None}

    @property
    def num_subgroups(self) -> int | None:
        return int(np.prod(self.sg_layout)) if self.sg_layout is not None else None

    def __str__(self) -> str:
        body = ", ".join(f"{k} = [{', '.join(map(str, v))}]" for k, v in self.fields().items())
        if set(self.fields()) <= {"sg_layout", "sg_data"}:
            return f"#xetile.wg_map<{body}>"
        return f"#xegpu.layout<{body}>"


def wg_map(sg_layout: Sequence[int], sg_data: Sequence[int] | None = None) -> Layout:
    """The user's spelling of a workgroup layout (XeTile RFC ``wg_map``)."""
    return Layout(sg_layout=tuple(int(x) for x in sg_layout),
                  sg_data=None if sg_data is None else tuple(int(x) for x in sg_data))


ROW_MAJOR = (1, 0)
COL_MAJOR = (0, 1)


@dataclass(frozen=True)
class TileType(Type):
    """A memory descriptor of a 2D block of a base array (``!xetile.tile``).

    ``order`` is the memory order ([1, 0] row-major, [0, 1] column-major; first = fastest);
    ``scatter`` marks a tile built from per-element offsets (load_gather / store_scatter).
    """
    shape: tuple[int, ...]
    dtype: ScalarType
    order: tuple[int, ...] = ROW_MAJOR
    layout: Layout | None = None
    scatter: bool = False

    def __str__(self) -> str:
        attrs = []
        if self.order != ROW_MAJOR:
            attrs.append(f"order = [{', '.join(map(str, self.order))}]")
        if self.layout is not None:
            attrs.append(f"wg = {self.layout}")
        if self.scatter:
            attrs.append("scatter = true")
        suffix = f", #xetile.tile_attr<{', '.join(attrs)}>" if attrs else ""
        return f"!xetile.tile<{_shape_str(self.shape)}x{self.dtype}{suffix}>"


@dataclass(frozen=True)
class ArrayType(Type):
    """A kernel's array argument: element type, rank, memory order, 16-byte alignment.
    Shape and strides are runtime values (``memref<?x?xbf16>``)."""
    dtype: ScalarType
    rank: int
    order: tuple[int, ...] = ROW_MAJOR
    aligned16: bool = True

    def __str__(self) -> str:
        dims = "x".join("?" * self.rank)
        extra = [] if self.order == tuple(range(self.rank - 1, -1, -1)) else [
            f"order = [{', '.join(map(str, self.order))}]"]
        if not self.aligned16:
            extra.append("unaligned")
        return f"memref<{dims}x{self.dtype}{''.join(', ' + e for e in extra)}>"


# ----------------------------------------------------------------------------------------------
# Values, operations, blocks, regions
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Location:
    """Source position of an op: file, 1-based line, 0-based column, function name."""
    file: str = "<unknown>"
    line: int = 0
    col: int = 0
    func: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class Value:
    """An SSA value. ``name_hint`` (usually the Python variable) makes printed IR readable."""
    __slots__ = ("type", "name_hint", "uses")

    def __init__(self, type: Type, name_hint: str | None = None):
        self.type = type
        self.name_hint = name_hint
        self.uses: list[tuple[Operation, int]] = []

    def replace_all_uses_with(self, new: "Value") -> None:
        for op, i in list(self.uses):
            op.set_operand(i, new)

    @property
    def owner(self):  # Operation for results, Block for block arguments
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name_hint or ''}: {self.type}>"


class OpResult(Value):
    __slots__ = ("op", "index")

    def __init__(self, type: Type, op: "Operation", index: int):
        super().__init__(type)
        self.op = op
        self.index = index

    @property
    def owner(self) -> "Operation":
        return self.op


class BlockArgument(Value):
    __slots__ = ("block", "index")

    def __init__(self, type: Type, block: "Block", index: int, name_hint: str | None = None):
        super().__init__(type, name_hint)
        self.block = block
        self.index = index

    @property
    def owner(self) -> "Block":
        return self.block


class Operation:
    """A generic op: ``name`` ("dialect.op"), operands, results, attributes, regions, loc."""
    __slots__ = ("name", "operands", "results", "attributes", "regions", "loc", "parent")

    def __init__(self, name: str, operands: Sequence[Value] = (), result_types: Sequence[Type] = (),
                 attributes: dict[str, Any] | None = None, regions: Sequence["Region"] = (),
                 loc: Location | None = None):
        self.name = name
        self.operands: list[Value] = []
        for v in operands:
            self._add_operand(v)
        self.results = [OpResult(t, self, i) for i, t in enumerate(result_types)]
        self.attributes: dict[str, Any] = dict(attributes or {})
        self.regions: list[Region] = list(regions)
        for r in self.regions:
            r.parent = self
        self.loc = loc or Location()
        self.parent: Block | None = None

    def _add_operand(self, v: Value) -> None:
        if not isinstance(v, Value):
            raise TypeError(f"operand of {self.name} is not an IR value: {v!r}")
        v.uses.append((self, len(self.operands)))
        self.operands.append(v)

    def set_operand(self, i: int, v: Value) -> None:
        old = self.operands[i]
        old.uses.remove((self, i))
        v.uses.append((self, i))
        self.operands[i] = v

    @property
    def result(self) -> OpResult:
        if len(self.results) != 1:
            raise ValueError(f"{self.name} has {len(self.results)} results")
        return self.results[0]

    @property
    def opdef(self) -> "OpDef | None":
        return OP_DEFS.get(self.name)

    def erase(self) -> None:
        """Detach from the parent block and drop operand uses (results must be unused)."""
        for i, v in enumerate(self.operands):
            v.uses.remove((self, i))
        if self.parent is not None:
            self.parent.ops.remove(self)
            self.parent = None

    def walk(self) -> Iterator["Operation"]:
        """Pre-order walk over this op and every op nested in its regions."""
        yield self
        for r in self.regions:
            for b in r.blocks:
                for op in list(b.ops):
                    yield from op.walk()

    def __repr__(self) -> str:
        return f"<Operation {self.name} at {self.loc}>"


class Block:
    """A list of ops with block arguments (loop induction variable, iter_args)."""
    __slots__ = ("args", "ops", "parent")

    def __init__(self, arg_types: Sequence[Type] = (), arg_names: Sequence[str | None] | None = None):
        names = list(arg_names) if arg_names is not None else [None] * len(arg_types)
        self.args = [BlockArgument(t, self, i, n) for i, (t, n) in enumerate(zip(arg_types, names))]
        self.ops: list[Operation] = []
        self.parent: Region | None = None

    def append(self, op: Operation) -> Operation:
        op.parent = self
        self.ops.append(op)
        return op

    def insert(self, i: int, op: Operation) -> Operation:
        op.parent = self
        self.ops.insert(i, op)
        return op

    def add_arg(self, type: Type, name_hint: str | None = None) -> BlockArgument:
        a = BlockArgument(type, self, len(self.args), name_hint)
        self.args.append(a)
        return a

    @property
    def terminator(self) -> Operation | None:
        return self.ops[-1] if self.ops else None


class Region:
    __slots__ = ("blocks", "parent")

    def __init__(self, blocks: Sequence[Block] = ()):
        self.blocks: list[Block] = []
        self.parent: Operation | None = None
        for b in blocks:
            self.add_block(b)

    def add_block(self, b: Block) -> Block:
        b.parent = self
        self.blocks.append(b)
        return b

    @property
    def block(self) -> Block:
        return self.blocks[0]


class Function:
    """A kernel: named arguments, one entry block, attributes (e.g. ``num_subgroups``).

    A kernel returns nothing; its entry block ends with a ``func.return`` op.
    """

    def __init__(self, name: str, arg_types: Sequence[Type], arg_names: Sequence[str],
                 attributes: dict[str, Any] | None = None, loc: Location | None = None):
        self.name = name
        self.region = Region([Block(arg_types, arg_names)])
        self.arg_names = list(arg_names)
        self.attributes: dict[str, Any] = dict(attributes or {})
        self.loc = loc or Location()

    @property
    def entry(self) -> Block:
        return self.region.block

    @property
    def args(self) -> list[BlockArgument]:
        return self.entry.args

    def walk(self) -> Iterator[Operation]:
        for op in list(self.entry.ops):
            yield from op.walk()


class Module:
    """A list of functions plus attributes (e.g. the specialization it was built for)."""

    def __init__(self, functions: Sequence[Function] = (), attributes: dict[str, Any] | None = None):
        self.functions = list(functions)
        self.attributes: dict[str, Any] = dict(attributes or {})

    def get(self, name: str) -> Function:
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(name)

    def __str__(self) -> str:
        return print_module(self)


# ----------------------------------------------------------------------------------------------
# Op definitions as data
# ----------------------------------------------------------------------------------------------


@dataclass
class OpDef:
    """Declaration of an op: ``name``, operand/result counts (None = variadic), region count,
    whether it ends a block, a verify function ``verify(op) -> None`` raising VerifyError,
    and a one-line summary used by the docs."""
    name: str
    num_operands: int | None = None
    num_results: int | None = None
    num_regions: int = 0
    terminator: bool = False
    pure: bool = True
    verify: Callable[[Operation], None] | None = None
    summary: str = ""
    attrs: tuple[str, ...] = field(default_factory=tuple)


OP_DEFS: dict[str, OpDef] = {}


def verify_subgroups_attr(op: "Operation") -> None:
    """An op's ``subgroups = [lo, hi]`` (prefetches): only subgroups lo <= id < hi issue it."""
    r = op.attributes.get("subgroups")
    if r is not None and not (isinstance(r, (list, tuple)) and len(r) == 2 and
                              all(isinstance(x, int) for x in r) and 0 <= r[0] < r[1]):
        raise VerifyError(f"subgroups must be [lo, hi] with 0 <= lo < hi, got {r!r}", op)


def register_op(opdef: OpDef) -> OpDef:
    """Add an op definition to the global registry (one per op name)."""
    OP_DEFS[opdef.name] = opdef
    return opdef


def verify_op_signature(op: Operation) -> None:
    """Check counts from the op's OpDef, then run its verify function."""
    d = OP_DEFS.get(op.name)
    if d is None:
        raise VerifyError(f"unknown op '{op.name}'", op)
    for what, want, have in (("operands", d.num_operands, len(op.operands)),
                             ("results", d.num_results, len(op.results)),
                             ("regions", d.num_regions, len(op.regions))):
        if want is not None and want != have:
            raise VerifyError(f"'{op.name}' expects {want} {what}, got {have}", op)
    if d.verify is not None:
        d.verify(op)


# ----------------------------------------------------------------------------------------------
# Builder
# ----------------------------------------------------------------------------------------------


class Builder:
    """Creates ops at an insertion point (end of a block, or before an index).

    ``loc`` is stamped on every created op; ``verify=True`` runs the op's verifier at creation,
    which lets the frontend report a rule violation at the Python line that caused it.
    """

    def __init__(self, block: Block | None = None, index: int | None = None, verify: bool = True):
        self.block = block
        self.index = index
        self.loc = Location()
        self.verify = verify

    @classmethod
    def at_end(cls, block: Block) -> "Builder":
        return cls(block)

    @classmethod
    def before(cls, op: Operation) -> "Builder":
        assert op.parent is not None
        return cls(op.parent, op.parent.ops.index(op))

    def insert(self, op: Operation) -> Operation:
        assert self.block is not None, "builder has no insertion point"
        if self.index is None:
            self.block.append(op)
        else:
            self.block.insert(self.index, op)
            self.index += 1
        if self.verify:
            verify_op_signature(op)
        return op

    def create(self, name: str, operands: Sequence[Value] = (), result_types: Sequence[Type] = (),
               attributes: dict[str, Any] | None = None, regions: Sequence[Region] = (),
               loc: Location | None = None) -> Operation:
        return self.insert(Operation(name, operands, result_types, attributes, regions, loc or self.loc))

    @contextlib.contextmanager
    def insertion_point(self, block: Block, index: int | None = None):
        """Temporarily build into another block (e.g. a loop body)."""
        saved = (self.block, self.index)
        self.block, self.index = block, index
        try:
            yield self
        finally:
            self.block, self.index = saved
