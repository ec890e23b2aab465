"""The checking layer between the AST visitor and the IR builder: type promotion, numpy-style
broadcasting made explicit, constant materialization and one function per language builtin.

Frontend values are IR :class:`Value` objects (runtime) or plain Python objects (compile time:
int, float, bool, str, tuple, ScalarType, Layout, None). Errors are :class:`SemanticError`
with a plain-English message; the visitor adds the source position.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..ir.core import (ArrayType, Builder, Layout, ScalarType, TileType, Value, VectorType,
                       bf16, bf16_bits_to_f32, f16, f32, f32_to_bf16_bits, i1, i8, i32, i64, index, u8)
from ..ir.xetile import ATOMIC_KINDS, REDUCE_KINDS, shape_of


class SemanticError(Exception):
    """A user mistake found while building IR (the visitor turns it into a CompilationError)."""


def check_fits(value: Any, dtype: ScalarType, what: str = "the constant") -> None:
    """A compile-time number must be exactly representable in range of ``dtype`` (numpy 2's rule
    for Python scalars: ``np.int8(1) + 300`` is an OverflowError): integers in the type's range,
    no fractional float for an integer type, no finite float that rounds to infinity. ``inf`` and
    ``nan`` themselves are float values like any other."""
    v = value.item() if isinstance(value, np.generic) else value
    if dtype == i1:
        if v not in (0, 1):   # True, False, 0, 1 (and 0.0, 1.0)
            raise SemanticError(f"{what} {value!r} is not a bool (i1 takes True, False, 0 or 1)")
        return
    if dtype.is_int:
        if isinstance(v, float) and not v.is_integer():
            raise SemanticError(f"cannot use the float {value!r} as {dtype}: {what} is not an integer")
        bw = dtype.bitwidth
        lo, hi = (0, (1 << bw) - 1) if dtype.kind == "uint" else (-(1 << (bw - 1)), (1 << (bw - 1)) - 1)
        if not lo <= int(v) <= hi:
            raise SemanticError(f"{what} {value!r} does not fit in {dtype} (range {lo}..{hi}); use a value "
                                f"in range, or compute in a wider type and cast with .to(...)")
        return
    try:
        fv = float(v)
    except OverflowError:
        raise SemanticError(f"{what} {value!r} overflows {dtype} (it would become inf)") from None
    if math.isfinite(fv):
        with np.errstate(over="ignore"):
            r = np.float16(fv) if dtype == f16 else np.float32(fv)
        if dtype == bf16 and np.isfinite(r):
            r = bf16_bits_to_f32(f32_to_bf16_bits(np.float32(r)))
        if not np.isfinite(r):
            raise SemanticError(f"{what} {value!r} overflows {dtype} (it would become inf)")


def is_runtime(x: Any) -> bool:
    return isinstance(x, Value)


def type_name(x: Any) -> str:
    return str(x.type) if isinstance(x, Value) else f"{type(x).__name__} {x!r}"


_FLOAT_RANK = {bf16: 1, f16: 1, f32: 2}
_INT_RANK = {i1: 0, i8: 1, u8: 1, i32: 2, i64: 3, index: 4}


class Semantic:
    """Builds typed IR for the language's operations through ``builder``."""

    def __init__(self, builder: Builder):
        self.b = builder

    # --- constants and conversions ------------------------------------------------------------

    def const(self, value: Any, t: ScalarType | VectorType, name: str | None = None) -> Value:
        dtype = t.dtype if isinstance(t, VectorType) else t
        if not isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
            raise SemanticError(f"expected a number for a {dtype} value, got {type_name(value)}")
        check_fits(value, dtype)
        if isinstance(value, bool) or dtype == i1:
            value = bool(value)
        elif dtype.is_int:
            value = int(value)
        else:
            value = float(value)
        v = self.b.create("arith.constant", [], [t], {"value": value}).result
        v.name_hint = name
        return v

    def to_index(self, x: Any, what: str) -> Value:
        """An offset/bound as an index value (ints fold to constants, i32 is index_cast)."""
        if isinstance(x, bool) or (not is_runtime(x) and not isinstance(x, int)):
            raise SemanticError(f"{what} must be an integer, got {type_name(x)}")
        if not is_runtime(x):
            return self.const(x, index)
        if isinstance(x.type, ScalarType) and x.type.is_int and x.type != i1:
            return x if x.type == index else self.cast(x, index)
        raise SemanticError(f"{what} must be an integer scalar, got {x.type}")

    def cast(self, x: Any, dtype: ScalarType) -> Value:
        """``x.to(dtype)``: element type conversion keeping the shape."""
        if not isinstance(dtype, ScalarType):
            raise SemanticError(f".to() needs an element type such as xl.float32, got {dtype!r}")
        if not is_runtime(x):
            return self.const(x, dtype)
        if isinstance(x.type, (TileType, ArrayType)):
            raise SemanticError(f"cannot cast a {x.type}; load it first with load_tile")
        src = x.type.dtype if isinstance(x.type, VectorType) else x.type
        if src == dtype:
            return x
        dst_t = VectorType(x.type.shape, dtype) if isinstance(x.type, VectorType) else dtype
        if src.is_float and dtype.is_float:
            name = "arith.extf" if dtype.bitwidth > src.bitwidth or (src, dtype) == (f16, bf16) \
                else "arith.truncf"
        elif src.is_float:
            name = "arith.fptoui" if dtype.kind == "uint" else "arith.fptosi"
        elif dtype.is_float:
            name = "arith.uitofp" if src.kind in ("uint", "bool") else "arith.sitofp"
        elif index in (src, dtype):
            name = "arith.index_cast"
        elif dtype.bitwidth > src.bitwidth:
            name = "arith.extui" if src.kind in ("uint", "bool") else "arith.extsi"
        else:
            name = "arith.trunci"
        return self.b.create(name, [x], [dst_t]).result

    # --- promotion and broadcasting ------------------------------------------------------------

    @staticmethod
    def dtype_of(x: Any) -> ScalarType | None:
        if isinstance(x, _Probe):
            return x.type
        if is_runtime(x):
            t = x.type
            if isinstance(t, (ScalarType,)):
                return t
            if isinstance(t, VectorType):
                return t.dtype
            raise SemanticError(f"a {t} is not a value; use load_tile to read a tile")
        return None

    def promote(self, a: Any, b: Any, op: str) -> ScalarType:
        da, db = self.dtype_of(a), self.dtype_of(b)
        for x, d in ((a, da), (b, db)):
            if d is None and not isinstance(x, (int, float)):
                raise SemanticError(f"unsupported operand for '{op}': {type_name(x)}")
        if da is None and db is None:
            raise SemanticError("internal: promote of two constants")
        if da is None or db is None:
            d, weak = (db, a) if da is None else (da, b)
            if isinstance(weak, float) and not isinstance(weak, bool) and not d.is_float:
                return f32
            return d
        if da == db:
            return da
        if da.is_float and db.is_float:
            if _FLOAT_RANK[da] == _FLOAT_RANK[db]:
                return f32  # bf16 with f16
            return da if _FLOAT_RANK[da] > _FLOAT_RANK[db] else db
        if da.is_float or db.is_float:
            return da if da.is_float else db
        return da if _INT_RANK[da] >= _INT_RANK[db] else db

    def broadcast_shape(self, sa: tuple[int, ...], sb: tuple[int, ...], op: str) -> tuple[int, ...]:
        if not sa or not sb:
            return sa or sb
        if len(sa) != len(sb):
            raise SemanticError(f"'{op}': shapes {list(sa)} and {list(sb)} have different ranks")
        out = []
        for x, y in zip(sa, sb):
            if x != y and 1 not in (x, y):
                raise SemanticError(f"'{op}': shapes {list(sa)} and {list(sb)} do not broadcast "
                                    f"(sizes must match or be 1)")
            out.append(max(x, y))
        return tuple(out)

    def to_value(self, x: Any, dtype: ScalarType, shape: tuple[int, ...]) -> Value:
        """Convert to ``dtype`` and broadcast to ``shape`` (scalars splat, size-1 dims repeat)."""
        t: Any = VectorType(shape, dtype) if shape else dtype
        if not is_runtime(x):
            return self.const(x, t)
        x = self.cast(x, dtype)
        xs = shape_of(x.type)
        if xs == shape:
            return x
        if not xs:
            return self.b.create("vector.splat", [x], [t]).result
        dims = [d for d in range(len(shape)) if xs[d] != shape[d]]
        return self.b.create("xetile.tile_broadcast", [x], [t], {"dims": dims}).result

    def operands(self, args: Sequence[Any], op: str, dtype: ScalarType | None = None):
        """Promote and broadcast several operands to one type and shape."""
        rt = [a for a in args if is_runtime(a)]
        if dtype is None:
            dtype = self.dtype_of(rt[0])
            for a in args:
                dtype = self.promote(_Probe(dtype), a, op)
        shape: tuple[int, ...] = ()
        for a in rt:
            shape = self.broadcast_shape(shape, shape_of(a.type), op)
        return [self.to_value(a, dtype, shape) for a in args], dtype, shape

    # --- arithmetic -----------------------------------------------------------------------------

    _FLOAT_OPS = {"+": "arith.addf", "-": "arith.subf", "*": "arith.mulf", "/": "arith.divf",
                  "%": "arith.remf", "**": "math.powf", "max": "arith.maxnumf", "min": "arith.minnumf"}
    _INT_OPS = {"+": "arith.addi", "-": "arith.subi", "*": "arith.muli", "//": "arith.floordivsi",
                "%": "arith.remsi", "&": "arith.andi", "|": "arith.ori", "^": "arith.xori",
                "<<": "arith.shli", ">>": "arith.shrsi", "max": "arith.maxsi", "min": "arith.minsi"}
    _UINT = {"arith.floordivsi": "arith.divui", "arith.remsi": "arith.remui", "arith.shrsi": "arith.shrui",
             "arith.maxsi": "arith.maxui", "arith.minsi": "arith.minui"}

    def binary(self, op: str, a: Any, b: Any) -> Value:
        (x, y), dtype, shape = self.operands([a, b], op)
        if op == "/" and not dtype.is_float:
            x, y, dtype = self.cast(x, f32), self.cast(y, f32), f32
        if op == "//" and dtype.is_float:
            q = self.binary("/", x, y)
            return self.unary("floor", q)
        table = self._FLOAT_OPS if dtype.is_float else self._INT_OPS
        if op not in table:
            raise SemanticError(f"operator '{op}' is not supported for {dtype}")
        name = table[op]
        if dtype.kind == "uint":
            name = self._UINT.get(name, name)
        return self.b.create(name, [x, y], [x.type]).result

    _CMP = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}

    def compare(self, op: str, a: Any, b: Any) -> Value:
        (x, y), dtype, shape = self.operands([a, b], op)
        rt = VectorType(shape, i1) if shape else i1
        name = "arith.cmpf" if dtype.is_float else "arith.cmpi"
        return self.b.create(name, [x, y], [rt], {"predicate": self._CMP[op]}).result

    _UNARY = {"exp": "math.exp", "exp2": "math.exp2", "log": "math.log", "log2": "math.log2",
              "sqrt": "math.sqrt", "rsqrt": "math.rsqrt", "tanh": "math.tanh", "sin": "math.sin",
              "cos": "math.cos", "erf": "math.erf", "floor": "math.floor", "ceil": "math.ceil"}

    def unary(self, fn: str, x: Any) -> Value:
        if not is_runtime(x):
            raise SemanticError(f"{fn}() of a compile-time value; use Python's math module")
        d = self.dtype_of(x)
        if fn == "neg":
            if d.is_float:
                return self.b.create("arith.negf", [x], [x.type]).result
            return self.binary("-", 0, x)
        if fn == "abs":
            return self.b.create("math.absf" if d.is_float else "math.absi", [x], [x.type]).result
        if not d.is_float:
            x = self.cast(x, f32)
        return self.b.create(self._UNARY[fn], [x], [x.type]).result

    def where(self, cond: Any, a: Any, b: Any) -> Value:
        if not is_runtime(cond) or self.dtype_of(cond) != i1:
            raise SemanticError(f"where() condition must be a runtime comparison result (i1), got "
                                f"{type_name(cond)}")
        if not is_runtime(a) and not is_runtime(b):
            dtype = f32 if isinstance(a, float) or isinstance(b, float) else index
        else:
            dtype = self.promote(a, b, "where") if is_runtime(a) and is_runtime(b) else \
                self.promote(a if is_runtime(a) else b, b if is_runtime(a) else a, "where")
        shape = self.broadcast_shape(shape_of(cond.type), shape_of(a.type) if is_runtime(a) else (),
                                     "where")
        shape = self.broadcast_shape(shape, shape_of(b.type) if is_runtime(b) else (), "where")
        c = self.to_value(cond, i1, shape)
        x, y = self.to_value(a, dtype, shape), self.to_value(b, dtype, shape)
        return self.b.create("arith.select", [c, x, y], [x.type]).result

    # --- tiles ----------------------------------------------------------------------------------

    @staticmethod
    def shape_arg(shape: Any, what: str) -> tuple[int, ...]:
        if not isinstance(shape, (list, tuple)) or not all(
                isinstance(s, int) and not isinstance(s, bool) for s in shape):
            raise SemanticError(f"{what} must be a list of compile-time ints (constexpr), got "
                                f"{type_name(shape) if not isinstance(shape, (list, tuple)) else shape}")
        if any(s <= 0 for s in shape):
            raise SemanticError(f"{what} must be positive, got {list(shape)}")
        return tuple(shape)

    @staticmethod
    def layout_arg(layout: Any, what: str) -> Layout | None:
        if layout is None or isinstance(layout, Layout):
            return layout
        raise SemanticError(f"{what} must be xl.wg_map(...) or None, got {type_name(layout)}")

    def need(self, x: Any, kinds: tuple, what: str) -> Value:
        if not is_runtime(x) or not isinstance(x.type, kinds):
            want = " or ".join({ArrayType: "an array argument", TileType: "a tile from init_tile",
                                VectorType: "a loaded tile (vector)"}[k] for k in kinds)
            raise SemanticError(f"{what} must be {want}, got {type_name(x)}")
        return x

    def init_tile(self, array: Any, offsets: Any, shape: Any = None, order: Any = None,
                  wg_map: Any = None) -> Value:
        arr = self.need(array, (ArrayType,), "init_tile's first argument")
        layout = self.layout_arg(wg_map, "init_tile wg_map")
        at: ArrayType = arr.type
        if is_runtime(offsets) and isinstance(offsets.type, VectorType):
            if shape is not None:
                raise SemanticError("a scatter tile takes its shape from the offsets vector")
            offs = self.cast(offsets, index)
            t = TileType(offsets.type.shape, at.dtype, layout=layout, scatter=True)
            return self.b.create("xetile.init_tile", [arr, offs], [t]).result
        if not isinstance(offsets, (list, tuple)) or len(offsets) != 2:
            raise SemanticError(f"init_tile offsets must be a list of 2 integers, got "
                                f"{type_name(offsets)}")
        shape = self.shape_arg(shape, "init_tile shape")
        if len(shape) != 2:
            raise SemanticError(f"init_tile shape must have 2 dims, got {list(shape)}")
        if order is None:
            order = at.order if at.rank == 2 else (1, 0)
        order = tuple(order) if isinstance(order, (list, tuple)) else order
        if order not in ((1, 0), (0, 1)):
            raise SemanticError(f"init_tile order must be [1, 0] (row-major) or [0, 1] "
                                f"(column-major), got {order!r}")
        offs = [self.to_index(o, "init_tile offset") for o in offsets]
        t = TileType(shape, at.dtype, order, layout)
        return self.b.create("xetile.init_tile", [arr, *offs], [t]).result

    def padding_arg(self, padding: Any, what: str) -> Any:
        if isinstance(padding, bool) or not isinstance(padding, (int, float)):
            raise SemanticError(f"{what} padding must be a compile-time number, got {type_name(padding)}")
        return padding

    def load_tile(self, tile: Any, padding: Any = 0) -> Value:
        t = self.need(tile, (TileType,), "load_tile's argument")
        check_fits(self.padding_arg(padding, "load_tile"), t.type.dtype, "the padding")
        attrs = {"padding": self.padding_arg(padding, "load_tile")} if padding != 0 else {}
        return self.b.create("xetile.load_tile", [t], [VectorType(t.type.shape, t.type.dtype)],
                             attrs).result

    def value_for(self, tile: Value, value: Any, what: str) -> Value:
        """A stored value: scalars splat; the element type must already match (explicit casts)."""
        tt: TileType = tile.type
        if not is_runtime(value):
            return self.const(value, VectorType(tt.shape, tt.dtype))
        if isinstance(value.type, ScalarType):
            return self.to_value(value, tt.dtype, tt.shape)
        return value

    def store_tile(self, tile: Any, value: Any) -> None:
        t = self.need(tile, (TileType,), "store_tile's first argument")
        self.b.create("xetile.store_tile", [self.value_for(t, value, "store_tile"), t], [])

    def prefetch_tile(self, tile: Any, locality: Any = 3) -> None:
        t = self.need(tile, (TileType,), "prefetch_tile's argument")
        self.b.create("xetile.prefetch_tile", [t], [], {"locality": locality})

    def update_tile_offset(self, tile: Any, d0: Any, d1: Any) -> Value:
        t = self.need(tile, (TileType,), "update_tile_offset's first argument")
        offs = [self.to_index(d, "update_tile_offset delta") for d in (d0, d1)]
        return self.b.create("xetile.update_tile_offset", [t, *offs], [t.type]).result

    def tile_mma(self, a: Any, b: Any, acc: Any = None, wg_map: Any = None,
                 input_precision: Any = None) -> Value:
        a = self.need(a, (VectorType,), "tile_mma A")
        b = self.need(b, (VectorType,), "tile_mma B")
        m, n = a.type.shape[0], b.type.shape[-1]
        rt = VectorType((m, n), i32 if a.type.dtype in (i8, u8) else f32)
        operands = [a, b]
        if acc is not None:
            operands.append(self.need(acc, (VectorType,), "tile_mma accumulator"))
        attrs: dict[str, Any] = {}
        layout = self.layout_arg(wg_map, "tile_mma wg_map")
        if layout is not None:
            attrs["layout"] = layout
        if input_precision is not None:
            attrs["input_precision"] = input_precision
        return self.b.create("xetile.tile_mma", operands, [rt], attrs).result

    def atomic_rmw_tile(self, tile: Any, value: Any, kind: Any = "add") -> Value:
        t = self.need(tile, (TileType,), "atomic_rmw_tile's first argument")
        if kind not in ATOMIC_KINDS:
            raise SemanticError(f"atomic_rmw_tile kind must be one of {list(ATOMIC_KINDS)}, got {kind!r}")
        v = self.value_for(t, value, "atomic_rmw_tile")
        return self.b.create("xetile.atomic_rmw_tile", [v, t], [v.type], {"kind": kind}).result

    def tile_reduce(self, x: Any, kind: Any, axis: Any) -> Value:
        x = self.need(x, (VectorType,), "tile_reduce's argument")
        if kind not in REDUCE_KINDS:
            raise SemanticError(f"tile_reduce kind must be one of {list(REDUCE_KINDS)}, got {kind!r}")
        if axis not in (0, 1):
            raise SemanticError(f"reduction axis must be 0 or 1, got {axis!r}")
        shape = tuple(1 if d == axis else s for d, s in enumerate(x.type.shape))
        return self.b.create("xetile.tile_reduce", [x], [VectorType(shape, x.type.dtype)],
                             {"kind": kind, "dims": [axis]}).result

    def tile_broadcast(self, x: Any, shape: Any) -> Value:
        x = self.need(x, (VectorType,), "tile_broadcast's argument")
        shape = self.shape_arg(shape, "tile_broadcast shape")
        src = tuple(x.type.shape)
        if len(src) != len(shape) or any(s != d and s != 1 for s, d in zip(src, shape)):
            raise SemanticError(f"tile_broadcast cannot broadcast a {list(src)} tile to {list(shape)}: "
                                f"each dimension must equal the target's or be 1 (broadcasting "
                                f"never shrinks a tile; use tile_reduce for that)")
        return self.to_value(x, x.type.dtype, shape)

    def tile_transpose(self, x: Any, wg_map: Any = None) -> Value:
        x = self.need(x, (VectorType,), "tile_transpose's argument")
        attrs: dict[str, Any] = {"permutation": [1, 0]}
        if wg_map is not None:
            attrs["layout"] = self.layout_arg(wg_map, "tile_transpose wg_map")
        return self.b.create("xetile.tile_transpose", [x],
                             [VectorType(x.type.shape[::-1], x.type.dtype)], attrs).result

    def convert_layout(self, x: Any, wg_map: Any, input_wg_map: Any = None) -> Value:
        x = self.need(x, (VectorType,), "convert_layout's argument")
        attrs: dict[str, Any] = {"layout": self.layout_arg(wg_map, "convert_layout wg_map")}
        if input_wg_map is not None:
            attrs["input_layout"] = self.layout_arg(input_wg_map, "convert_layout input_wg_map")
        return self.b.create("xetile.convert_layout", [x], [x.type], attrs).result

    def mask_for(self, t: Value, mask: Any) -> Value:
        if mask is None or mask is True:
            return self.const(True, VectorType(t.type.shape, i1))
        if not is_runtime(mask) or self.dtype_of(mask) != i1:
            raise SemanticError(f"mask must be a comparison result (i1 vector), got {type_name(mask)}")
        return self.to_value(mask, i1, t.type.shape)

    def load_gather(self, tile: Any, mask: Any = None, padding: Any = 0) -> Value:
        t = self.need(tile, (TileType,), "load_gather's argument")
        check_fits(self.padding_arg(padding, "load_gather"), t.type.dtype, "the padding")
        attrs = {"padding": self.padding_arg(padding, "load_gather")} if padding != 0 else {}
        return self.b.create("xetile.load_gather", [t, self.mask_for(t, mask)],
                             [VectorType(t.type.shape, t.type.dtype)], attrs).result

    def store_scatter(self, tile: Any, value: Any, mask: Any = None) -> None:
        t = self.need(tile, (TileType,), "store_scatter's first argument")
        v = self.value_for(t, value, "store_scatter")
        self.b.create("xetile.store_scatter", [v, self.mask_for(t, mask), t], [])

    def full(self, shape: Any, value: Any, dtype: Any) -> Value:
        shape = self.shape_arg(shape, "shape")
        if not isinstance(dtype, ScalarType):
            raise SemanticError(f"dtype must be an element type such as xl.float32, got {dtype!r}")
        if is_runtime(value):
            return self.to_value(value, dtype, shape)
        return self.const(value, VectorType(shape, dtype))

    def arange(self, start: Any, end: Any, axis: Any = 1) -> Value:
        if not all(isinstance(v, int) for v in (start, end)) or end <= start:
            raise SemanticError(f"arange bounds must be compile-time ints with start < end, got "
                                f"{start!r}, {end!r}")
        if axis not in (0, 1):
            raise SemanticError(f"arange axis must be 0 or 1, got {axis!r}")
        n = end - start
        shape = (1, n) if axis == 1 else (n, 1)
        v = self.b.create("vector.step", [], [VectorType(shape, index)]).result
        return self.binary("+", v, start) if start else v


class _Probe:
    """A stand-in runtime operand of a given dtype for promotion (never reaches the IR)."""

    def __init__(self, dtype: ScalarType):
        self.type = dtype


