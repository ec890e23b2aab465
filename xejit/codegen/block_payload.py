"""2D block loads and prefetches through IGC's address-payload builtins (real Intel GPUs only).

The Khronos builtins of SPV_INTEL_2d_block_io (``emulation.declare_block_*``) take the whole
surface -- base, width, height, pitch, (x, y) -- on every call, and Intel's compiler (IGC) builds
the block message's address payload from them per message: about eight register moves per 2D
block load or prefetch inside a k-loop (``benchmarks/bench_device_code.py``). IGC also accepts
its own builtins, resolved by name in its ``LSCFuncsResolution`` pass into the GenISA
``LSC2DBlock*AddrPayload`` intrinsics, which keep the payload in one register:

* ``ptr __builtin_IB_subgroup_createBlock2DAddressPayload(i64 base, i32 width_bytes - 1,
  i32 height - 1, i32 pitch_bytes - 1, i32 x, i32 y, i32 block_width, i32 block_height,
  i32 block_count)`` -- once, where the descriptor is created (block shape: constants);
* ``void __builtin_IB_subgroup_setBlock2DAddressPayloadBlockX / BlockY(ptr, i32)`` -- per access
  (``add...BlockX / BlockY``: added in place);
* ``V __builtin_IB_subgroup_block_read_ap[_transpose|_transform]_u<bits>_m<h>k<w>v<count>(ptr,
  i32 imm_x, i32 imm_y, i32 cache)`` and ``void
  __builtin_IB_subgroup_block_read_ap_prefetch_u<bits>_m<h>k<w>v<count>(ptr, i32, i32, i32)``:
  the shape is in the name and must equal the payload's.

They arrive through SPIR-V as imported functions (LLVM's SPIR-V backend adds the Linkage
capability; spirv-val accepts it). The per-lane data is the block message's registers, the
same as the Khronos builtin's for the variants :func:`problem` admits (it leaves out array
loads whose blocks the message pads to whole registers). Emulation (``XEJIT_EMULATE``) keeps
the Khronos semantics: nothing here runs on the CPU device.

Example:
    >>> from xejit.codegen import builtins as bi, emulation as emu
    >>> from xejit.codegen.targets import get_target
    >>> v = emu.BlockVariant("load_transform", 16, 16, 16, 16, 1)
    >>> problem(get_target("pvc"), v) is None, builtin_name(v)
    (True, '__builtin_IB_subgroup_block_read_ap_transform_u16_m16k16v1')
"""
from __future__ import annotations

from llvmlite import ir

from . import builtins as bi
from .emulation import BlockVariant
from .targets import Target

__all__ = ["PAYLOAD", "add_coords", "builtin_name", "create", "load", "prefetch", "problem", "set_coords",
           "set_xy"]

I32, I64 = bi.I32, bi.I64
#: The payload handle: an opaque pointer (``int*`` in IGC's builtin declarations).
PAYLOAD = ir.PointerType()

_CREATE = "__builtin_IB_subgroup_createBlock2DAddressPayload"
_SET = {"x": "__builtin_IB_subgroup_setBlock2DAddressPayloadBlockX",
        "y": "__builtin_IB_subgroup_setBlock2DAddressPayloadBlockY"}
_ADD = {"x": "__builtin_IB_subgroup_addBlock2DAddressPayloadBlockX",
        "y": "__builtin_IB_subgroup_addBlock2DAddressPayloadBlockY"}
_HEIGHTS = (1, 2, 4, 8, 16, 32)
_WIDTHS = (1, 2, 4, 8, 16, 32, 64)
#: enum LSC_LDCC: 0 = the default, 4 = L1 cached, L3 cached (what IGC gives the Khronos prefetch).
_CACHE_DEFAULT, _CACHE_L1C_L3C = 0, 4


def problem(target: Target, v: BlockVariant) -> str | None:
    """None when variant ``v`` goes through an address payload on ``target``, else why not.

    The rules are those of IGC's builtin names (heights 1..32, widths 1..64, counts 1, 2, 4,
    powers of two; plain rows of 4..64 bytes in all; transposes of one block of <= 8 32-bit or
    <= 4 64-bit columns; transforms of 8-bit blocks >= 4 x 4 and 16-bit ones >= 2 x 2, <= 32
    wide), plus: an array load's blocks fill whole registers (the message pads each block to
    a register boundary, the SPIR-V builtin's per-lane data has them back to back).
    """
    lim = target.block_io
    if lim is None or not lim.address_payload:
        return f"target {target.name!r} has no address-payload 2D block builtins"
    if v.kind not in ("load", "load_transform", "load_transpose", "prefetch"):
        return f"2D block {v.kind}: through the SPIR-V builtin"
    if v.height not in _HEIGHTS or v.width not in _WIDTHS or v.count not in (1, 2, 4):
        return f"block {v.height} x {v.width} x {v.count} has no address-payload builtin name"
    bits, w, h = v.elem_bits, v.width, v.height
    if v.kind == "load_transpose":
        ok = v.count == 1 and ((bits == 32 and h <= 32 and w <= 8) or (bits == 64 and h == 8 and w <= 4))
    elif v.kind == "load_transform":
        ok = (bits == 8 and h >= 4 and w >= 4) or (bits == 16 and h >= 2 and 2 <= w <= 32)
    else:
        ok = 4 <= w * bits // 8 and w * bits // 8 * v.count <= 64
    if not ok:
        return f"2D block {v.kind} of {h} x {w} x {v.count} {bits}-bit: not an address-payload shape"
    if v.elem_bits == 64:
        return "64-bit blocks: through the SPIR-V builtin"
    total, unit = v.lane_elems() * v.lane_bits, _unit_bits(v)
    if v.kind != "prefetch" and (total % unit or total // unit > 16):
        return (f"2D block {v.kind} of {v.lane_elems()} x i{v.lane_bits} per lane: not a SPIR-V vector "
                f"of at most 16 i{unit} (the SPIR-V builtin writes it to memory)")
    grf = target.registers.bytes_each if target.registers else 64
    if v.count > 1 and (h * w * bits // 8) % grf:
        return f"array load of {h} x {w} {bits}-bit blocks: the message pads each block to a register"
    return None


def builtin_name(v: BlockVariant) -> str:
    """IGC's name of the load / prefetch of variant ``v`` (the shape is part of the name)."""
    kind = {"load": "", "load_transform": "_transform", "load_transpose": "_transpose",
            "prefetch": "_prefetch"}[v.kind]
    return f"__builtin_IB_subgroup_block_read_ap{kind}_u{v.elem_bits}_m{v.height}k{v.width}v{v.count}"


def create(b: ir.IRBuilder, v: BlockVariant, base: ir.Value, width: ir.Value, height: ir.Value,
           pitch: ir.Value) -> ir.Value:
    """A payload for blocks of variant ``v`` on the surface (``base`` a global pointer, 64-byte
    aligned; ``width`` and ``pitch`` in bytes, ``height`` in rows, all i32) at (0, 0)."""
    fn = bi.declare(b.module, _CREATE, PAYLOAD, [I64] + [I32] * 8)
    one = I32(1)
    return bi.call(b, fn, [b.ptrtoint(base, I64), b.sub(width, one), b.sub(height, one), b.sub(pitch, one),
                           I32(0), I32(0), I32(v.width), I32(v.height), I32(v.count)])


def set_xy(b: ir.IRBuilder, payload: ir.Value, x: ir.Value, y: ir.Value) -> None:
    """Point ``payload`` at block (x, y): x in elements of the block's size, y in rows (i32)."""
    set_coords(b, payload, [("x", x), ("y", y)])


def set_coords(b: ir.IRBuilder, payload: ir.Value, coords) -> None:
    """Set some of ``payload``'s block coordinates: ``coords`` [("x" or "y", i32 value)]."""
    for axis, val in coords:
        bi.call(b, bi.declare(b.module, _SET[axis], bi.VOID, [PAYLOAD, I32]), [payload, val])


def add_coords(b: ir.IRBuilder, payload: ir.Value, coords) -> None:
    """Move ``payload``'s block: ``coords`` [("x" or "y", i32 added in place)] (one add each)."""
    for axis, val in coords:
        bi.call(b, bi.declare(b.module, _ADD[axis], bi.VOID, [PAYLOAD, I32]), [payload, val])


def _unit_bits(v: BlockVariant) -> int:
    return 16 if v.kind in ("load", "prefetch") and v.elem_bits < 32 else 32


def _value_types(v: BlockVariant) -> tuple[list, ir.Type]:
    """(shape of the builtin's result, per-lane type of the Khronos builtin's data).

    The result's element is the message's per-lane unit -- 16 bits for 8/16-bit rows, 32 bits for
    transformed, transposed and 32-bit data (IGC's builtin declarations): as a per-lane vector it
    holds the block registers in order, so its bytes are the Khronos builtin's destination's.
    """
    el = _unit_bits(v)
    n = v.lane_elems() * v.lane_bits // el
    lane = ir.IntType(v.lane_bits)
    return [ir.IntType(el)] * n, (lane if v.lane_elems() == 1 else ir.VectorType(lane, v.lane_elems()))


def load(b: ir.IRBuilder, v: BlockVariant, payload: ir.Value, imm: tuple[int, int] = (0, 0)) -> ir.Value:
    """The block at the payload's (x, y) plus the immediate offsets ``imm`` (x, y: targets whose
    block messages take them, ``BlockIOLimits.immediate_offsets``), as ``<lane_elems x
    i<lane_bits>>`` (the layout of the Khronos builtin's destination)."""
    shape, lane = _value_types(v)
    ret = shape[0] if len(shape) == 1 else ir.VectorType(shape[0], len(shape))
    fn = bi.declare(b.module, builtin_name(v), ret, [PAYLOAD, I32, I32, I32])
    val = bi.call(b, fn, [payload, I32(imm[0]), I32(imm[1]), I32(_CACHE_DEFAULT)])
    return val if ret == lane else b.bitcast(val, lane)


def prefetch(b: ir.IRBuilder, v: BlockVariant, payload: ir.Value) -> None:
    """Prefetch the block at the payload's (x, y) into L1 and L3."""
    fn = bi.declare(b.module, builtin_name(v), bi.VOID, [PAYLOAD, I32, I32, I32])
    bi.call(b, fn, [payload, I32(0), I32(0), I32(_CACHE_L1C_L3C)])
