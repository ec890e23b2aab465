"""The XeTile dialect (plus the small arith/math/scf/func subset kernels need), declared as data.

Each op is an :class:`OpDef` with a verify function enforcing the XeTile RFC's shape, dtype
and ``wg_map`` rules. Workgroup-level vector ops carry their result layout in the ``layout``
attribute (the RFC's ``{#wg_map}``); tiles carry it in their type.
The numpy semantics of these ops live in :mod:`xejit.ir.xetile_semantics`.
"""
from __future__ import annotations

from typing import Sequence

from .core import verify_subgroups_attr
from .core import (ArrayType, Layout, OpDef, Operation, ScalarType, TileType, Type, Value,
                   VectorType, VerifyError, i1, index, register_op, f32, i32)

# ----------------------------------------------------------------------------------------------
# helpers shared by verify functions
# ----------------------------------------------------------------------------------------------


def _fail(op: Operation, msg: str) -> None:
    raise VerifyError(msg, op)


def shape_of(t: Type) -> tuple[int, ...]:
    """Shape of a vector or tile type; () for scalars."""
    return tuple(t.shape) if isinstance(t, (VectorType, TileType)) else ()


def elem_type(t: Type) -> ScalarType:
    if isinstance(t, ScalarType):
        return t
    if isinstance(t, (VectorType, TileType, ArrayType)):
        return t.dtype
    raise TypeError(f"{t} has no element type")


def layout_of(v: Value) -> Layout | None:
    """The layout a value was produced with (from its tile type or its producer's attribute)."""
    if isinstance(v.type, TileType):
        return v.type.layout
    owner = getattr(v, "op", None)
    if owner is None:
        return None
    if owner.name in ("xetile.load_tile", "xetile.load_gather"):
        return owner.operands[0].type.layout
    return owner.attributes.get("layout")


def check_layout_fits(op: Operation, layout: Layout | None, shape: Sequence[int], what: str) -> None:
    """RFC wg_map rules: rank matches; per dim, sg_layout*sg_data divides the tile or the tile
    divides it; sg_data defaults to shape/sg_layout; inst_data divides sg_data; lane_layout *
    lane_data divides inst_data (or sg_data)."""
    if layout is None:
        return
    rank = len(shape)
    for name, val in layout.fields().items():
        if len(val) != rank:
            _fail(op, f"{what}: layout field {name}={list(val)} has rank {len(val)}, "
                      f"but the tile {list(shape)} has rank {rank}")
        if any(x <= 0 for x in val) and name != "order":
            _fail(op, f"{what}: layout field {name}={list(val)} must be positive")
    if layout.order is not None and sorted(layout.order) != list(range(rank)):
        _fail(op, f"{what}: layout order {list(layout.order)} is not a permutation of 0..{rank - 1}")
    sg_data = layout.sg_data
    if layout.sg_layout is not None:
        if sg_data is None:
            for d in range(rank):
                if shape[d] % layout.sg_layout[d]:
                    _fail(op, f"{what}: sg_layout {list(layout.sg_layout)} does not divide the tile "
                              f"{list(shape)} (dim {d}: {shape[d]} % {layout.sg_layout[d]} != 0)")
            sg_data = tuple(s // l for s, l in zip(shape, layout.sg_layout))
        else:
            for d in range(rank):
                span = layout.sg_layout[d] * sg_data[d]
                if shape[d] % span and span % shape[d]:
                    _fail(op, f"{what}: layout sg_layout={list(layout.sg_layout)}, "
                              f"sg_data={list(sg_data)} does not divide the tile {list(shape)}: "
                              f"in dim {d}, {layout.sg_layout[d]}*{sg_data[d]}={span} and {shape[d]} "
                              f"must divide one another")
                if sg_data[d] > shape[d] or shape[d] % sg_data[d]:
                    _fail(op, f"{what}: sg_data {list(sg_data)} does not divide the tile {list(shape)}")
    unit = sg_data if sg_data is not None else tuple(shape)
    if layout.inst_data is not None:
        if any(u % i for u, i in zip(unit, layout.inst_data)):
            _fail(op, f"{what}: inst_data {list(layout.inst_data)} does not divide {list(unit)}")
        unit = layout.inst_data
    if layout.lane_layout is not None:
        lane_data = layout.lane_data or (1,) * rank
        if any(u % (l * d) for u, l, d in zip(unit, layout.lane_layout, lane_data)):
            _fail(op, f"{what}: lane_layout {list(layout.lane_layout)} x lane_data {list(lane_data)} "
                      f"does not divide {list(unit)}")


def _check_consistent(op: Operation, value: Value, derived: Layout, what: str) -> None:
    """RFC: an input's layout derived from the result must agree with its producer's layout."""
    have = layout_of(value)
    if have is None or have.sg_layout is None or derived.sg_layout is None:
        return
    if have.sg_layout != derived.sg_layout or (
            have.sg_data is not None and derived.sg_data is not None and have.sg_data != derived.sg_data):
        _fail(op, f"{what} has layout {have}, but the result layout requires {derived}; "
                  f"insert a convert_layout")


def _same_types(op: Operation) -> None:
    ts = {v.type for v in op.operands} | {r.type for r in op.results}
    if len(ts) != 1:
        _fail(op, f"'{op.name}' needs operands and result of one type, got "
                  f"{', '.join(str(v.type) for v in op.operands)} -> {op.results[0].type}")


def _is_value_type(t: Type) -> bool:
    return isinstance(t, (ScalarType, VectorType))


# ----------------------------------------------------------------------------------------------
# func / scf / arith / math
# ----------------------------------------------------------------------------------------------

register_op(OpDef("func.return", 0, 0, terminator=True, pure=False, summary="end of a kernel"))


def _verify_yield(op: Operation) -> None:
    parent = op.parent.parent.parent if op.parent and op.parent.parent else None
    if parent is not None and parent.name == "scf.for":
        want = [r.type for r in parent.results]
        have = [v.type for v in op.operands]
        if want != have:
            _fail(op, f"scf.yield types ({', '.join(map(str, have))}) differ from the loop's "
                      f"carried types ({', '.join(map(str, want))})")


register_op(OpDef("scf.yield", None, 0, terminator=True, verify=_verify_yield,
                  summary="yield loop-carried values"))


def _verify_for(op: Operation) -> None:
    lb, ub, step, *inits = op.operands
    for v, n in ((lb, "lower bound"), (ub, "upper bound"), (step, "step")):
        if v.type != index:
            _fail(op, f"scf.for {n} must be an index, got {v.type}")
    if [r.type for r in op.results] != [v.type for v in inits]:
        _fail(op, "scf.for results must have the types of its iter_args")
    body = op.regions[0].block
    if [a.type for a in body.args] != [index] + [v.type for v in inits]:
        _fail(op, "scf.for body arguments must be (index, *iter_arg types)")
    term = body.terminator
    if term is None or term.name != "scf.yield":
        _fail(op, "scf.for body must end with scf.yield")
    _verify_yield(term)


register_op(OpDef("scf.for", None, None, num_regions=1, pure=False, verify=_verify_for,
                  summary="counted loop with loop-carried values (iter_args)"))


def _verify_constant(op: Operation) -> None:
    t = op.result.type
    if not _is_value_type(t):
        _fail(op, f"arith.constant must produce a scalar or vector, got {t}")
    if not isinstance(op.attributes.get("value"), (int, float, bool)):
        _fail(op, "arith.constant needs a scalar 'value' attribute (a splat)")


register_op(OpDef("arith.constant", 0, 1, verify=_verify_constant, attrs=("value",),
                  summary="scalar constant, or a vector filled with one value"))

FLOAT_BINARY = ("arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.maxnumf",
                "arith.minnumf", "arith.remf", "math.powf")
INT_BINARY = ("arith.addi", "arith.subi", "arith.muli", "arith.divsi", "arith.divui",
              "arith.floordivsi", "arith.remsi", "arith.remui", "arith.maxsi", "arith.minsi",
              "arith.maxui", "arith.minui", "arith.andi", "arith.ori", "arith.xori", "arith.shli",
              "arith.shrsi", "arith.shrui")
FLOAT_UNARY = ("math.exp", "math.exp2", "math.log", "math.log2", "math.sqrt", "math.rsqrt",
               "math.tanh", "math.sin", "math.cos", "math.erf", "math.absf", "arith.negf",
               "math.floor", "math.ceil")
INT_UNARY = ("math.absi",)
CASTS = ("arith.extf", "arith.truncf", "arith.sitofp", "arith.uitofp", "arith.fptosi",
         "arith.fptoui", "arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast",
         "arith.bitcast")


def _elementwise_verifier(want_float: bool):
    def verify(op: Operation) -> None:
        _same_types(op)
        t = op.operands[0].type
        if not _is_value_type(t):
            _fail(op, f"'{op.name}' works on scalars and vectors, not {t}")
        et = elem_type(t)
        if want_float and not et.is_float:
            _fail(op, f"'{op.name}' needs a floating-point type, got {et}")
        if not want_float and not et.is_int:
            _fail(op, f"'{op.name}' needs an integer type, got {et}")
        _check_operand_layouts(op)
    return verify


def _check_operand_layouts(op: Operation) -> None:
    layouts = {layout_of(v) for v in op.operands if isinstance(v.type, VectorType)} - {None}
    own = op.attributes.get("layout")
    if own is not None:
        layouts.add(own)
    if len(layouts) > 1:
        _fail(op, f"'{op.name}' mixes operands with different layouts "
                  f"({', '.join(sorted(map(str, layouts)))}); insert a convert_layout")


for _n in FLOAT_BINARY:
    register_op(OpDef(_n, 2, 1, verify=_elementwise_verifier(True), summary="element-wise binary"))
for _n in INT_BINARY:
    register_op(OpDef(_n, 2, 1, verify=_elementwise_verifier(False), summary="element-wise binary"))
for _n in FLOAT_UNARY:
    register_op(OpDef(_n, 1, 1, verify=_elementwise_verifier(True), summary="element-wise unary"))
for _n in INT_UNARY:
    register_op(OpDef(_n, 1, 1, verify=_elementwise_verifier(False), summary="element-wise unary"))

CMP_PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")


def _verify_cmp(op: Operation) -> None:
    a, b = op.operands
    if a.type != b.type or not _is_value_type(a.type):
        _fail(op, f"'{op.name}' compares two values of one type, got {a.type} and {b.type}")
    if op.attributes.get("predicate") not in CMP_PREDICATES:
        _fail(op, f"'{op.name}' predicate must be one of {CMP_PREDICATES}")
    want = VectorType(shape_of(a.type), i1) if isinstance(a.type, VectorType) else i1
    if op.result.type != want:
        _fail(op, f"'{op.name}' result must be {want}")
    if op.name == "arith.cmpf" and not elem_type(a.type).is_float:
        _fail(op, "arith.cmpf compares floats")
    if op.name == "arith.cmpi" and not elem_type(a.type).is_int:
        _fail(op, "arith.cmpi compares integers")


register_op(OpDef("arith.cmpf", 2, 1, verify=_verify_cmp, attrs=("predicate",), summary="compare floats"))
register_op(OpDef("arith.cmpi", 2, 1, verify=_verify_cmp, attrs=("predicate",), summary="compare integers"))


def _verify_select(op: Operation) -> None:
    c, a, b = op.operands
    if a.type != b.type or op.result.type != a.type:
        _fail(op, f"arith.select needs two values of one type, got {a.type} and {b.type}")
    if elem_type(c.type) != i1 or (isinstance(c.type, VectorType) and shape_of(c.type) != shape_of(a.type)):
        _fail(op, f"arith.select condition must be i1 of the values' shape, got {c.type}")


register_op(OpDef("arith.select", 3, 1, verify=_verify_select, summary="element-wise where"))


def _verify_cast(op: Operation) -> None:
    src, dst = op.operands[0].type, op.result.type
    if not (_is_value_type(src) and _is_value_type(dst)) or shape_of(src) != shape_of(dst) or (
            isinstance(src, VectorType) != isinstance(dst, VectorType)):
        _fail(op, f"'{op.name}' casts element types and keeps the shape: {src} -> {dst}")


for _n in CASTS:
    register_op(OpDef(_n, 1, 1, verify=_verify_cast, summary="element type conversion"))


def _verify_splat(op: Operation) -> None:
    src, dst = op.operands[0].type, op.result.type
    if not isinstance(src, ScalarType) or not isinstance(dst, VectorType) or dst.dtype != src:
        _fail(op, f"vector.splat makes a vector of a scalar's type: {src} -> {dst}")


register_op(OpDef("vector.splat", 1, 1, verify=_verify_splat, summary="scalar to vector"))

# ----------------------------------------------------------------------------------------------
# kernel environment ops
# ----------------------------------------------------------------------------------------------


def _verify_axis(op: Operation) -> None:
    if op.attributes.get("axis") not in (0, 1, 2):
        _fail(op, f"{op.name} axis must be 0, 1 or 2, got {op.attributes.get('axis')}")
    if op.result.type != index:
        _fail(op, f"{op.name} returns an index")


def _verify_dim(op: Operation) -> None:
    arr = op.operands[0].type
    if not isinstance(arr, ArrayType):
        _fail(op, f"{op.name} needs an array, got {arr}")
    if not 0 <= op.attributes.get("dim", -1) < arr.rank:
        _fail(op, f"{op.name} dim {op.attributes.get('dim')} is out of range for rank {arr.rank}")


register_op(OpDef("xejit.program_id", 0, 1, verify=_verify_axis, attrs=("axis",),
                  summary="workgroup id along a grid axis"))
register_op(OpDef("xejit.num_programs", 0, 1, verify=_verify_axis, attrs=("axis",),
                  summary="grid size along an axis"))
register_op(OpDef("xejit.dim", 1, 1, verify=_verify_dim, attrs=("dim",), summary="array shape[dim]"))
register_op(OpDef("xejit.stride", 1, 1, verify=_verify_dim, attrs=("dim",),
                  summary="array strides[dim] in elements"))
register_op(OpDef("xejit.print", None, 0, pure=False, attrs=("prefix", "names"),
                  summary="print values (interpreter only; the compiler drops it)"))
register_op(OpDef("xejit.breakpoint", None, 0, pure=False, attrs=("names",),
                  summary="stop in pdb with the live values (interpreter only)"))

# ----------------------------------------------------------------------------------------------
# XeTile memory ops
# ----------------------------------------------------------------------------------------------

TILE_DTYPES = ("bf16", "f16", "f32", "i8", "u8", "i32")


def _verify_tile_type(op: Operation, t: TileType) -> None:
    if len(t.shape) != 2 or any(s <= 0 for s in t.shape):
        _fail(op, f"a tile must be 2D with positive sizes, got {list(t.shape)}")
    if t.order not in ((1, 0), (0, 1)):
        _fail(op, f"tile order must be [1, 0] or [0, 1], got {list(t.order)}")
    check_layout_fits(op, t.layout, t.shape, "tile")


def _verify_init_tile(op: Operation) -> None:
    arr, *offs = op.operands
    t = op.result.type
    if not isinstance(arr.type, ArrayType):
        _fail(op, f"init_tile needs an array argument, got {arr.type}")
    if not isinstance(t, TileType):
        _fail(op, "init_tile produces a tile")
    if t.dtype != arr.type.dtype:
        _fail(op, f"tile element type {t.dtype} differs from the array's {arr.type.dtype}")
    _verify_tile_type(op, t)
    if t.scatter:
        if len(offs) != 1 or not isinstance(offs[0].type, VectorType) or shape_of(offs[0].type) != t.shape \
                or not elem_type(offs[0].type).is_int:
            _fail(op, f"a scatter init_tile takes one integer offsets vector of the tile's shape "
                      f"{list(t.shape)}")
        return
    if len(offs) != 2 or any(v.type != index for v in offs):
        _fail(op, f"init_tile takes 2 index offsets, got {len(offs)}")
    if arr.type.rank not in (1, 2):
        _fail(op, f"init_tile needs a 1D or 2D array, got rank {arr.type.rank}")
    if arr.type.rank == 2 and t.order != arr.type.order:
        _fail(op, f"tile order {list(t.order)} does not match the array's memory order "
                  f"{list(arr.type.order)} ({'row' if arr.type.order == (1, 0) else 'column'}-major)")
    if arr.type.rank == 1 and t.shape[0] != 1:
        _fail(op, f"a tile of a 1D array must have shape [1, n], got {list(t.shape)}")


register_op(OpDef("xetile.init_tile", None, 1, verify=_verify_init_tile,
                  summary="describe a 2D block of an array at runtime offsets"))


def _need_tile(op: Operation, v: Value, scatter: bool = False) -> TileType:
    t = v.type
    if not isinstance(t, TileType):
        _fail(op, f"'{op.name}' needs a tile (from init_tile), got {t}")
    if t.scatter != scatter:
        _fail(op, f"'{op.name}' needs a {'scatter ' if scatter else ''}tile, got {t}"
                  + ("; use load_gather/store_scatter" if t.scatter else "; use load_tile/store_tile"))
    return t


def _verify_load_tile(op: Operation) -> None:
    t = _need_tile(op, op.operands[0])
    if op.result.type != VectorType(t.shape, t.dtype):
        _fail(op, f"load_tile of {t} produces {VectorType(t.shape, t.dtype)}, not {op.result.type}")
    if not isinstance(op.attributes.get("padding", 0), (int, float)):
        _fail(op, "load_tile padding must be a number")


def _verify_store(op: Operation, value: Value, t: TileType) -> None:
    if not isinstance(value.type, VectorType) or value.type.shape != t.shape:
        _fail(op, f"'{op.name}' stores a vector of the tile's shape {list(t.shape)}, got {value.type}")
    if value.type.dtype != t.dtype:
        _fail(op, f"'{op.name}' value type {value.type.dtype} differs from the tile's {t.dtype}; "
                  f"cast it with .to(...)")


def _verify_store_tile(op: Operation) -> None:
    value, tile = op.operands
    _verify_store(op, value, _need_tile(op, tile))


def _verify_prefetch(op: Operation) -> None:
    _need_tile(op, op.operands[0])
    if op.attributes.get("locality", 3) not in (0, 1, 2, 3):
        _fail(op, "prefetch_tile locality must be 0..3")
    verify_subgroups_attr(op)


def _verify_update_offset(op: Operation) -> None:
    tile, *deltas = op.operands
    t = _need_tile(op, tile)
    if len(deltas) != 2 or any(d.type != index for d in deltas):
        _fail(op, "update_tile_offset takes a tile and two index deltas")
    if op.result.type != t:
        _fail(op, "update_tile_offset returns the tile's type")


register_op(OpDef("xetile.load_tile", 1, 1, verify=_verify_load_tile, attrs=("padding",),
                  summary="load a tile into a vector; out-of-bounds elements read `padding`"))
register_op(OpDef("xetile.store_tile", 2, 0, pure=False, verify=_verify_store_tile,
                  summary="store a vector into a tile; out-of-bounds elements are dropped"))
register_op(OpDef("xetile.prefetch_tile", 1, 0, pure=False, verify=_verify_prefetch,
                  attrs=("locality", "subgroups"),
                  summary="prefetch a tile into cache (no effect on values); `subgroups = [lo, hi]`: "
                          "only those subgroups issue it"))
register_op(OpDef("xetile.update_tile_offset", 3, 1, verify=_verify_update_offset,
                  summary="move a tile by relative offsets"))

ATOMIC_KINDS = ("add", "max", "min", "mul", "and", "or", "xor", "xchg")


def _verify_atomic(op: Operation) -> None:
    value, tile = op.operands
    t = _need_tile(op, tile)
    _verify_store(op, value, t)
    kind = op.attributes.get("kind")
    if kind not in ATOMIC_KINDS:
        _fail(op, f"atomic_rmw_tile kind must be one of {ATOMIC_KINDS}, got {kind!r}")
    if kind in ("and", "or", "xor") and not t.dtype.is_int:
        _fail(op, f"atomic_rmw_tile <{kind}> needs integers, got {t.dtype}")
    if op.result.type != value.type:
        _fail(op, "atomic_rmw_tile returns the old values, a vector like its input")


register_op(OpDef("xetile.atomic_rmw_tile", 2, 1, pure=False, verify=_verify_atomic, attrs=("kind",),
                  summary="atomic read-modify-write of a tile; returns the old values"))


def _verify_load_gather(op: Operation) -> None:
    tile, mask = op.operands
    t = _need_tile(op, tile, scatter=True)
    if mask.type != VectorType(t.shape, i1):
        _fail(op, f"load_gather mask must be {VectorType(t.shape, i1)}, got {mask.type}")
    if op.result.type != VectorType(t.shape, t.dtype):
        _fail(op, "load_gather produces a vector of the tile's shape and type")


def _verify_store_scatter(op: Operation) -> None:
    value, mask, tile = op.operands
    t = _need_tile(op, tile, scatter=True)
    if mask.type != VectorType(t.shape, i1):
        _fail(op, f"store_scatter mask must be {VectorType(t.shape, i1)}, got {mask.type}")
    _verify_store(op, value, t)


register_op(OpDef("xetile.load_gather", 2, 1, verify=_verify_load_gather, attrs=("padding",),
                  summary="masked per-element load; masked-off elements read `padding`"))
register_op(OpDef("xetile.store_scatter", 3, 0, pure=False, verify=_verify_store_scatter,
                  summary="masked per-element store"))

# ----------------------------------------------------------------------------------------------
# XeTile vector ops
# ----------------------------------------------------------------------------------------------

MMA_TYPES = {"bf16": f32, "f16": f32, "f32": f32, "i8": i32, "u8": i32}


def _vec2d(op: Operation, v: Value, what: str) -> VectorType:
    if not isinstance(v.type, VectorType) or len(v.type.shape) != 2:
        _fail(op, f"'{op.name}' {what} must be a 2D vector (a loaded tile), got {v.type}")
    return v.type


def _verify_mma(op: Operation) -> None:
    a, b = _vec2d(op, op.operands[0], "A"), _vec2d(op, op.operands[1], "B")
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        _fail(op, f"tile_mma shapes do not chain: A is {m}x{k}, B is {k2}x{n} (A's columns must "
                  f"equal B's rows)")
    if a.dtype != b.dtype:
        _fail(op, f"tile_mma A and B must have one element type, got {a.dtype} and {b.dtype}")
    acc_t = MMA_TYPES.get(a.dtype.name)
    if acc_t is None:
        _fail(op, f"tile_mma does not support {a.dtype} inputs (supported: bf16, f16, f32, i8, u8)")
    want = VectorType((m, n), acc_t)
    if len(op.operands) == 3 and op.operands[2].type != want:
        _fail(op, f"tile_mma accumulator must be {want} for {a.dtype} inputs, got {op.operands[2].type}")
    if op.result.type != want:
        _fail(op, f"tile_mma result must be {want}")
    if op.attributes.get("input_precision", "ieee") not in ("ieee", "tf32"):
        _fail(op, "tile_mma input_precision must be 'ieee' or 'tf32'")
    if op.attributes.get("input_precision") == "tf32" and a.dtype != f32:
        _fail(op, "tile_mma input_precision='tf32' needs f32 inputs")
    lay = op.attributes.get("layout")
    check_layout_fits(op, lay, (m, n), "tile_mma result")
    if lay is not None and lay.sg_layout is not None:
        sg_m, sg_n = lay.sg_data or (m // lay.sg_layout[0], n // lay.sg_layout[1])
        _check_consistent(op, op.operands[0], Layout(lay.sg_layout, (sg_m, k)), "tile_mma A")
        _check_consistent(op, op.operands[1], Layout(lay.sg_layout, (k, sg_n)), "tile_mma B")
        if len(op.operands) == 3:
            _check_consistent(op, op.operands[2], Layout(lay.sg_layout, (sg_m, sg_n)), "tile_mma C")


register_op(OpDef("xetile.tile_mma", None, 1, verify=_verify_mma, attrs=("layout", "input_precision"),
                  summary="C + A @ B with f32 (float) or i32 (int8) accumulation"))


def _verify_transpose(op: Operation) -> None:
    src = _vec2d(op, op.operands[0], "source")
    if list(op.attributes.get("permutation", [1, 0])) != [1, 0]:
        _fail(op, "tile_transpose permutation must be [1, 0]")
    want = VectorType(src.shape[::-1], src.dtype)
    if op.result.type != want:
        _fail(op, f"tile_transpose of {src} produces {want}")
    lay = op.attributes.get("layout")
    check_layout_fits(op, lay, want.shape, "tile_transpose result")
    if lay is not None and lay.sg_layout is not None and lay.sg_data is not None:
        _check_consistent(op, op.operands[0], Layout(lay.sg_layout[::-1], lay.sg_data[::-1]),
                          "tile_transpose source")


register_op(OpDef("xetile.tile_transpose", 1, 1, verify=_verify_transpose,
                  attrs=("permutation", "layout"), summary="2D transpose"))

REDUCE_KINDS = ("add", "mul", "max", "min", "and", "or", "xor")


def _verify_reduce(op: Operation) -> None:
    src = _vec2d(op, op.operands[0], "source")
    dims = list(op.attributes.get("dims", []))
    kind = op.attributes.get("kind")
    if kind not in REDUCE_KINDS:
        _fail(op, f"tile_reduce kind must be one of {REDUCE_KINDS}, got {kind!r}")
    if kind in ("and", "or", "xor") and not src.dtype.is_int:
        _fail(op, f"tile_reduce <{kind}> needs integers, got {src.dtype}")
    if len(dims) != 1 or dims[0] not in (0, 1):
        _fail(op, f"tile_reduce reduces one dimension, 0 or 1; got {dims}")
    shape = tuple(1 if d in dims else s for d, s in enumerate(src.shape))
    want = VectorType(shape, src.dtype)
    if op.result.type != want:
        _fail(op, f"tile_reduce of {src} over {dims} produces {want}")
    lay = op.attributes.get("layout")
    check_layout_fits(op, lay, shape, "tile_reduce result")
    if lay is not None and lay.sg_layout is not None and lay.sg_data is not None:
        if _split_reduce_source(op, lay, src.shape, dims[0]):
            return
        sg = tuple(src.shape[d] if d in dims else lay.sg_data[d] for d in range(2))
        _check_consistent(op, op.operands[0], Layout(lay.sg_layout, sg), "tile_reduce source")


def _split_reduce_source(op: Operation, lay: Layout, shape, d: int) -> bool:
    """xejit's extension of the RFC rule: the source may also split the reduced dim over its
    subgroups (same sg_layout and order, sg_data in the other dim as the result's; the compiler
    combines the partials through SLM). True when the source's layout is such a split."""
    have = layout_of(op.operands[0])
    if have is None or have.sg_layout is None or have.sg_data is None:
        return False
    o = 1 - d
    return (have.sg_layout == lay.sg_layout and (have.order or (1, 0)) == (lay.order or (1, 0))
            and have.sg_data[o] == lay.sg_data[o] and lay.sg_data[d] == 1 and have.sg_layout[d] > 1
            and have.sg_layout[d] * have.sg_data[d] <= shape[d])


register_op(OpDef("xetile.tile_reduce", 1, 1, verify=_verify_reduce, attrs=("kind", "dims", "layout"),
                  summary="reduce one dimension to size 1"))


def _verify_broadcast(op: Operation) -> None:
    src = _vec2d(op, op.operands[0], "source")
    dims = list(op.attributes.get("dims", []))
    dst = op.result.type
    if not isinstance(dst, VectorType) or len(dst.shape) != 2 or dst.dtype != src.dtype:
        _fail(op, f"tile_broadcast produces a 2D vector of {src.dtype}, got {dst}")
    if not dims or any(d not in (0, 1) for d in dims):
        _fail(op, f"tile_broadcast dims must be a non-empty subset of [0, 1], got {dims}")
    for d in range(2):
        if d in dims and src.shape[d] != 1:
            _fail(op, f"tile_broadcast along dim {d} needs size 1 there, got {src}")
        if d not in dims and src.shape[d] != dst.shape[d]:
            _fail(op, f"tile_broadcast keeps dim {d}: {src} -> {dst}")
    lay = op.attributes.get("layout")
    check_layout_fits(op, lay, dst.shape, "tile_broadcast result")
    if lay is not None and lay.sg_layout is not None and lay.sg_data is not None:
        sg = tuple(1 if d in dims else lay.sg_data[d] for d in range(2))
        _check_consistent(op, op.operands[0], Layout(lay.sg_layout, sg), "tile_broadcast source")


register_op(OpDef("xetile.tile_broadcast", 1, 1, verify=_verify_broadcast, attrs=("dims", "layout"),
                  summary="repeat size-1 dimensions"))


def _verify_convert_layout(op: Operation) -> None:
    src = _vec2d(op, op.operands[0], "source")
    if op.result.type != src:
        _fail(op, "convert_layout keeps the vector type")
    lay = op.attributes.get("layout")
    if not isinstance(lay, Layout):
        _fail(op, "convert_layout needs a target layout")
    check_layout_fits(op, lay, src.shape, "convert_layout result")
    inp = op.attributes.get("input_layout")
    if inp is not None:
        check_layout_fits(op, inp, src.shape, "convert_layout input")
        have = layout_of(op.operands[0])
        if have is not None and have != inp:
            _fail(op, f"convert_layout input_layout {inp} differs from the source's layout {have}")


register_op(OpDef("xetile.convert_layout", 1, 1, verify=_verify_convert_layout,
                  attrs=("layout", "input_layout"), summary="redistribute a vector over subgroups"))


def _verify_function_layouts(fn) -> None:
    """All layouts of a kernel use the launch's subgroup count."""
    n = fn.attributes.get("num_subgroups")
    for op in fn.walk():
        lays = [r.type.layout for r in op.results if isinstance(r.type, TileType)]
        lays += [op.attributes[k] for k in ("layout", "input_layout") if k in op.attributes]
        for lay in lays:
            if lay is not None and lay.sg_layout is not None and n is not None and lay.num_subgroups != n:
                raise VerifyError(f"layout {lay} uses {lay.num_subgroups} subgroups, but the kernel "
                                  f"is launched with num_subgroups={n}", op)


FUNCTION_CHECKS = [_verify_function_layouts]


def _verify_step(op: Operation) -> None:
    t = op.result.type
    if not isinstance(t, VectorType) or len(t.shape) != 2 or 1 not in t.shape or t.dtype != index:
        _fail(op, f"vector.step produces a [1, n] or [n, 1] index vector, got {t}")


register_op(OpDef("vector.step", 0, 1, verify=_verify_step,
                  summary="0, 1, ..., n-1 along the vector's non-unit dimension"))
