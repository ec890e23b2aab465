"""numpy semantics of the XeTile dialect (and its arith/math/scf subset): one rule per op.

Values: scalars are numpy scalars, vectors numpy arrays of ``ScalarType.np_dtype`` (bf16 as
float32 rounded to bf16 precision), tiles :class:`TileValue`, arrays :class:`Buffer`.
"""
from __future__ import annotations

import math
import linecache
from dataclasses import dataclass

import numpy as np

from .. import options
from ..errors import OutOfBoundsError
from .core import Operation, ScalarType, VectorType, bf16, round_to_bf16, f32
from .interpreter import ATOMIC_LOCK, Buffer, Interpreter, impl
from .xetile import elem_type


@dataclass(frozen=True)
class TileValue:
    """Runtime tile: a buffer, the tile's 2D offsets (or per-element offsets) and shape."""
    buffer: Buffer
    offsets: tuple[int, int]
    shape: tuple[int, int]
    elem_offsets: np.ndarray | None = None  # scatter tiles

    def window(self):
        """(slice in the array, slice in the tile) of the in-bounds part, or None."""
        (h, w), (H, W) = self.shape, self.buffer.shape2d
        r0, c0 = self.offsets
        rr0, rr1, cc0, cc1 = max(r0, 0), min(r0 + h, H), max(c0, 0), min(c0 + w, W)
        if rr0 >= rr1 or cc0 >= cc1:
            return None
        return ((slice(rr0, rr1), slice(cc0, cc1)),
                (slice(rr0 - r0, rr1 - r0), slice(cc0 - c0, cc1 - c0)))


def saturating_float_to_int(x, np_dtype) -> np.ndarray:
    """Truncate toward zero; values beyond the type's range give its min / max, NaN gives 0."""
    info = np.iinfo(np_dtype)
    with np.errstate(invalid="ignore"):
        xf = np.nan_to_num(np.trunc(np.asarray(x, np.float64)), nan=0.0)
        over = xf >= float(info.max) + 1        # 2^(bits-1) or 2^bits: exact in float64
        under = xf < float(info.min)
        safe = np.where(over | under, 0.0, xf).astype(np_dtype)
    return np.where(over, info.max, np.where(under, info.min, safe)).astype(np_dtype)


def cast_value(x, dtype: ScalarType):
    """Convert an interpreter value to ``dtype``: float -> int truncates toward zero and
    saturates (NaN -> 0); anything -> bool is ``x != 0`` (the rule of every target)."""
    x = np.asarray(x)
    if dtype.bitwidth == 1:
        out = (x != 0)
        return out if out.ndim else out[()]
    if dtype.is_int and x.dtype.kind == "f":
        out = saturating_float_to_int(x, dtype.np_dtype)
        return out if out.ndim else out[()]
    if dtype == bf16:
        out = round_to_bf16(x.astype(np.float32))
    else:
        out = x.astype(dtype.np_dtype)
    return out if out.ndim else out[()]


def _result(op: Operation, x):
    """Round/cast a computed value to the op's result element type."""
    return cast_value(x, elem_type(op.results[0].type))


# --- scf / arith / math ----------------------------------------------------------------------

@impl("scf.for")
def _for(it: Interpreter, op: Operation, args):
    lb, ub, step, *carried = args
    if step <= 0:
        raise ValueError(f"loop step must be positive, got {step}")
    body = op.regions[0].block
    for k in range(int(lb), int(ub), int(step)):
        carried = it.run_block(body, [np.int64(k), *carried])
    return carried


@impl("arith.constant")
def _constant(it, op, args):
    t = op.result.type
    v = op.attributes["value"]
    if isinstance(t, VectorType):
        return [cast_value(np.full(t.shape, v), t.dtype)]
    return [cast_value(v, t)]


@impl("vector.splat")
def _splat(it, op, args):
    return [np.full(op.result.type.shape, args[0], dtype=op.result.type.dtype.np_dtype)]


def _divsi(a, b):
    q = np.floor_divide(a, b)
    return np.where((np.remainder(a, b) != 0) & ((a < 0) != (b < 0)), q + 1, q)


BINARY = {
    "arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply,
    "arith.divf": np.divide, "arith.maxnumf": np.fmax, "arith.minnumf": np.fmin,
    "arith.remf": np.fmod, "math.powf": np.power,
    "arith.addi": np.add, "arith.subi": np.subtract, "arith.muli": np.multiply,
    "arith.divsi": _divsi, "arith.divui": np.floor_divide, "arith.floordivsi": np.floor_divide,
    "arith.remsi": np.fmod, "arith.remui": np.remainder, "arith.maxsi": np.maximum,
    "arith.minsi": np.minimum, "arith.maxui": np.maximum, "arith.minui": np.minimum,
    "arith.andi": np.bitwise_and, "arith.ori": np.bitwise_or, "arith.xori": np.bitwise_xor,
    "arith.shli": np.left_shift, "arith.shrsi": np.right_shift, "arith.shrui": np.right_shift,
}


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


UNARY = {
    "math.exp": np.exp, "math.exp2": np.exp2, "math.log": np.log, "math.log2": np.log2,
    "math.sqrt": np.sqrt, "math.rsqrt": lambda x: 1.0 / np.sqrt(x), "math.tanh": np.tanh,
    "math.sin": np.sin, "math.cos": np.cos, "math.erf": _erf, "math.absf": np.abs,
    "arith.negf": np.negative, "math.floor": np.floor, "math.ceil": np.ceil, "math.absi": np.abs,
}


def _compute_dtype(t: ScalarType):
    # f16/bf16 math is done in f32 and rounded back, like the hardware's f32 ALU path.
    return np.float32 if t.is_float else t.np_dtype


@impl(*BINARY)
def _binary(it, op, args):
    ct = _compute_dtype(elem_type(op.operands[0].type))
    a, b = (np.asarray(x, dtype=ct) for x in args)
    return [_result(op, BINARY[op.name](a, b))]


@impl(*UNARY)
def _unary(it, op, args):
    ct = _compute_dtype(elem_type(op.operands[0].type))
    return [_result(op, UNARY[op.name](np.asarray(args[0], dtype=ct)))]


CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
       "gt": np.greater, "ge": np.greater_equal}


@impl("arith.cmpf", "arith.cmpi")
def _cmp(it, op, args):
    r = CMP[op.attributes["predicate"]](args[0], args[1])
    return [r if np.ndim(r) else np.bool_(r)]


@impl("arith.select")
def _select(it, op, args):
    return [_result(op, np.where(args[0], args[1], args[2]))]


@impl("arith.extf", "arith.truncf", "arith.sitofp", "arith.uitofp", "arith.fptosi", "arith.fptoui",
      "arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast")
def _cast(it, op, args):
    return [_result(op, args[0])]


# --- environment ------------------------------------------------------------------------------

@impl("xejit.program_id")
def _program_id(it, op, args):
    return [np.int64(it.program_id[op.attributes["axis"]])]


@impl("xejit.num_programs")
def _num_programs(it, op, args):
    return [np.int64(it.grid[op.attributes["axis"]])]


@impl("xejit.dim")
def _dim(it, op, args):
    return [np.int64(args[0].data.shape[op.attributes["dim"]])]


@impl("xejit.stride")
def _stride(it, op, args):
    arr = args[0].data
    return [np.int64(arr.strides[op.attributes["dim"]] // arr.itemsize)]


@impl("xejit.print")
def _print(it, op, args):
    parts = [f"{n}={v}" for n, v in zip(op.attributes.get("names", []), args)]
    print(f"pid {it.program_id}: {op.attributes.get('prefix', '')}", *parts)


@impl("xejit.breakpoint")
def _breakpoint(it, op, args):
    values = dict(zip(op.attributes.get("names", []), args))  # noqa: F841  (inspect in pdb)
    program_id = it.program_id  # noqa: F841
    breakpoint()  # the kernel's live values are in `values`; `up` shows the interpreter


# --- tiles ------------------------------------------------------------------------------------

@impl("xetile.init_tile")
def _init_tile(it, op, args):
    buf, *offs = args
    t = op.result.type
    if t.scatter:
        return [TileValue(buf, (0, 0), t.shape, np.asarray(offs[0], dtype=np.int64))]
    return [TileValue(buf, (int(offs[0]), int(offs[1])), t.shape)]


@impl("xetile.update_tile_offset")
def _update(it, op, args):
    tile, d0, d1 = args
    return [TileValue(tile.buffer, (tile.offsets[0] + int(d0), tile.offsets[1] + int(d1)), tile.shape)]


@impl("xetile.prefetch_tile")
def _prefetch(it, op, args):
    return None


def _padded(op: Operation, tile: TileValue) -> np.ndarray:
    dtype = op.results[0].type.dtype
    return cast_value(np.full(tile.shape, op.attributes.get("padding", 0)), dtype)


@impl("xetile.load_tile")
def _load_tile(it, op, args):
    tile = args[0]
    out = _padded(op, tile)
    win = tile.window()
    if win is not None:
        src, dst = win
        out[dst] = Buffer(tile.buffer.view2d, tile.buffer.dtype).read(src)
    return [out]


def _store_window(tile: TileValue, value: np.ndarray) -> None:
    win = tile.window()
    if win is None:
        return
    src, dst = win
    view = tile.buffer.view2d
    Buffer(view, tile.buffer.dtype).write(src, value[dst])


@impl("xetile.store_tile")
def _store_tile(it, op, args):
    value, tile = args
    _store_window(tile, value)


ATOMIC = {"add": np.add, "max": np.maximum, "min": np.minimum, "mul": np.multiply,
          "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
          "xchg": lambda old, new: new}


@impl("xetile.atomic_rmw_tile")
def _atomic(it, op, args):
    value, tile = args
    dtype = op.results[0].type.dtype
    old = cast_value(np.zeros(tile.shape), dtype)
    win = tile.window()
    if win is not None:
        src, dst = win
        buf = Buffer(tile.buffer.view2d, tile.buffer.dtype)
        with ATOMIC_LOCK:
            cur = buf.read(src)
            old[dst] = cur
            ct = _compute_dtype(dtype)
            new = ATOMIC[op.attributes["kind"]](cur.astype(ct), np.asarray(value[dst], dtype=ct))
            buf.write(src, cast_value(new, dtype))
    return [old]


def _lanes(op: Operation, tile, mask: np.ndarray, kind: str) -> np.ndarray:
    """The lanes of a gather/scatter that access memory: masked-in and naming an element of the
    array, as on the device (out-of-range lanes read the padding / are dropped); under
    ``XEJIT_DEBUG=1`` an out-of-range masked-in lane is an ``OutOfBoundsError`` (an IndexError)."""
    mask = np.broadcast_to(mask, tile.elem_offsets.shape)
    inside = tile.buffer.inside(tile.elem_offsets)
    bad = mask & ~inside
    if bad.any():
        if options.current().debug:
            src = linecache.getline(op.loc.file, op.loc.line).rstrip()
            raise OutOfBoundsError(
                f"{op.loc}: {kind} at element offset {int(tile.elem_offsets[bad].flat[0])}, outside the array of "
                f"shape {tuple(tile.buffer.data.shape)} (XEJIT_DEBUG=1; without it the lane reads the padding / "
                f"is not written)" + (f"\n{src}" if src else ""))
    return mask & inside


@impl("xetile.load_gather")
def _load_gather(it, op, args):
    tile, mask = args
    out = _padded(op, tile)
    mask = _lanes(op, tile, mask, "load_gather")
    if mask.any():
        idx = tile.buffer.flat_to_index(tile.elem_offsets[mask])
        out[mask] = tile.buffer.read(idx)
    return [out]


@impl("xetile.store_scatter")
def _store_scatter(it, op, args):
    value, mask, tile = args
    mask = _lanes(op, tile, mask, "store_scatter")
    if mask.any():
        idx = tile.buffer.flat_to_index(tile.elem_offsets[mask])
        tile.buffer.write(idx, value[mask])


def _tf32(x: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    r = (u + np.uint32(0xFFF) + ((u >> np.uint32(13)) & np.uint32(1))) & np.uint32(0xFFFFE000)
    return r.view(np.float32)


def mma_reference(op, a, b, c) -> np.ndarray:
    """``c + a @ b`` as a matrix engine computes it: f32 accumulation (inputs rounded to tf32 when
    the op asks), int8/uint8 exact in int64 then wrapped to i32 like the 32-bit accumulator.
    Shared by ``xetile.tile_mma`` and ``xegpu.dpas``."""
    rt = op.result.type.dtype
    if rt == f32:
        if op.attributes.get("input_precision") == "tf32":
            a, b = _tf32(a), _tf32(b)
        r = np.matmul(a.astype(np.float32), b.astype(np.float32))
    else:
        r = np.matmul(a.astype(np.int64), b.astype(np.int64))
    if c:
        r = r + c[0]
    return cast_value(r, rt)


@impl("xetile.tile_mma")
def _mma(it, op, args):
    a, b, *c = args
    return [mma_reference(op, a, b, c)]


@impl("xetile.tile_transpose")
def _transpose(it, op, args):
    return [np.ascontiguousarray(args[0].T)]


# max / min ignore NaN like the element-wise xl.maximum (arith.maxnumf, C's fmax) and the device
# lowerings: NaN only where every element is NaN (found by tests/hostile: np.max propagated it)
REDUCE = {"add": np.sum, "mul": np.prod, "max": np.fmax.reduce, "min": np.fmin.reduce,
          "and": np.bitwise_and.reduce, "or": np.bitwise_or.reduce, "xor": np.bitwise_xor.reduce}


@impl("xetile.tile_reduce")
def _reduce(it, op, args):
    dim = op.attributes["dims"][0]
    x = args[0]
    ct = _compute_dtype(op.results[0].type.dtype)
    r = REDUCE[op.attributes["kind"]](np.asarray(x, dtype=ct), axis=dim, keepdims=True)
    return [_result(op, r)]


@impl("xetile.tile_broadcast")
def _broadcast(it, op, args):
    return [np.ascontiguousarray(np.broadcast_to(args[0], op.result.type.shape))]


@impl("xetile.convert_layout")
def _convert_layout(it, op, args):
    return [args[0]]  # layouts change the distribution, never the values


@impl("vector.step")
def _step(it, op, args):
    shape = op.result.type.shape
    return [np.arange(max(shape), dtype=np.int64).reshape(shape)]
