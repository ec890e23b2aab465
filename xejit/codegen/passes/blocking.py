"""Blocking: subgroup-level XeTile IR (``xetile-sg``) -> XeGPU IR for DPAS targets.

Every subgroup tile is split into blocks that one hardware instruction handles. Load blocks and
DPAS blocks are chosen independently; ``vector.extract_strided_slice`` unpacks load blocks into
DPAS blocks (the XeTile RFC's tile_unpack):

* register blocks (values): A operand ``[min(8, R), K]``, B operand ``[K, N]`` VNNI-packed
  (``[K/v, N, v]``, plain for tf32), everything else (accumulators, element-wise values, stores)
  ``[min(8, R), min(N, C)]``; N = the target's DPAS N (its subgroup size), K = 32 bytes of operand.
* 2D block loads: A and C-role tiles ``height = min(R, 32)``, width = the register block width,
  ``array_length`` as many blocks as fit 64 bytes per row (and the count limit); row-major B is
  loaded with the VNNI transform; column-major B with a transposed load (16-bit data as 32-bit
  pairs, ``transpose_bit_width = 32``); stores ``[min(8, R), min(N, C)]``.
* When a tile cannot use 2D block IO (array not 16-byte aligned or pitch not a multiple of
  16 bytes, column-major A/C tiles, 8-bit transposed B, a block the target's limits reject) the
  pass uses per-element gather/scatter (``xegpu.create_tdesc`` block form + ``load_gather`` /
  ``store_scatter``), and records the op and the reason in the report. ``XEJIT_STRICT=1`` makes
  that an error.

Supported xetile-sg ops: init_tile (2D arrays, and 1D as [1, n]; scatter tiles of element
offsets), load_tile, store_tile, prefetch_tile, update_tile_offset, tile_mma, load_gather /
store_scatter (masked, per-element), tile_broadcast of a row or a column, vector.step,
element-wise arith/math, casts, compares/select, constants and splats, scf.for, and scalar index
code, tile_reduce along dim 0 or 1 (within a subgroup), atomic_rmw_tile (per-element,
block-scattered descriptors), and the SLM exchange of wg_to_sg (``gpu.slm_store`` /
``gpu.slm_load`` per register block, barriers) that carries convert_layout, tile_transpose and
reductions split over subgroups. Anything else raises :class:`CompilerError` naming the op and
its source line.

Example: see ``tests/xegpu/test_blocking.py``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ... import options
from ...ir import xetile as xt
from ...ir.core import (ArrayType, Block, Builder, Function, Operation, Region, TileType, Value,
                        VectorType, f32, i1, index)
from ...ir.xegpu import TensorDescType, dpas_type_name, vnni_factor, load_result_types
from ..builtins import REDUCE_OP
from ..targets import Target, check_block_shape
from .common import CompilerError

#: DPAS B blocks side by side (along N) per transposed load of column-major B. A transposed load
#: is at most 8 words wide (one B block deep) and 32 rows tall, so 2 halves the loads; but its
#: transposed rows then alternate between the two blocks register by register, and Intel's
#: compiler moves each of its 16 registers once to make the two contiguous DPAS operands: +16
#: instructions for each load saved (fp16 256x128x32 on pvc: 5 -> 3 loads, 2.81 -> 4.62
#: instructions per DPAS; docs/compiler.md). One block per load is the default for that reason.
TRANSPOSED_B_BLOCKS_PER_LOAD = 1

# ----------------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------------


@dataclass
class BlockingReport:
    """Instruction selection of one kernel: per memory op, the instruction and, for fallbacks,
    the reason; DPAS count per loop body and in total."""
    entries: list[dict] = field(default_factory=list)
    dpas_total: int = 0

    def add(self, op: Operation, instruction: str, reason: str = "") -> None:
        self.entries.append({"op": op.name, "loc": str(op.loc), "instruction": instruction,
                             "reason": reason})

    @property
    def fallbacks(self) -> list[dict]:
        return [e for e in self.entries if e["reason"]]

    def as_dict(self) -> dict:
        return {"memory_ops": list(self.entries), "fallbacks": self.fallbacks,
                "dpas": self.dpas_total}


def strict_mode() -> bool:
    return options.current().strict


# ----------------------------------------------------------------------------------------------
# Blocked values and tile plans
# ----------------------------------------------------------------------------------------------


@dataclass
class VBlocks:
    """A subgroup vector [R, C] as a grid of register blocks [bh, bw] (B blocks VNNI-packed)."""
    shape: tuple[int, int]
    bh: int
    bw: int
    grid: list[list[Value]]
    packed: bool = False

    def flat(self) -> list[Value]:
        return [v for row in self.grid for v in row]


@dataclass
class TilePlan:
    """How a tile class is read or written: ``role`` (A, B, C), ``kind`` (2d / gather),
    register block (bh, bw), and for 2D: load block height, array length, transpose/pack."""
    role: str
    kind: str
    shape: tuple[int, int]
    dtype: Any
    bh: int
    bw: int
    lh: int = 0
    al: int = 1
    packed: bool = False
    transposed: bool = False          # column-major memory, transposed loads
    #: transposed loads: DPAS B blocks side by side (along N) per load instruction
    tn: int = 1
    #: a prefetch-only column-major tile: plain blocks of the memory view [C, R] (bh, bw, lh,
    #: al describe that view), descriptors at swapped coordinates
    swapped: bool = False
    reason: str = ""

    def desc_origins(self) -> list[tuple[int, int]]:
        """Logical (row, col) offsets of every descriptor relative to the tile's origin."""
        R, C = self.shape
        if self.kind == "gather":
            return [(i, j) for i in range(0, R, self.bh) for j in range(0, C, self.bw)]
        if self.transposed:
            return [(i, j) for i in range(0, R, self.bh) for j in range(0, C, self.bw * self.tn)]
        if self.swapped:     # (logical row, col) of each memory-view block
            return [(j, i) for i in range(0, C, self.lh) for j in range(0, R, self.bw * self.al)]
        return [(i, j) for i in range(0, R, self.lh) for j in range(0, C, self.bw * self.al)]

    def desc_type(self) -> TensorDescType:
        if self.kind == "gather":
            return TensorDescType((self.bh, self.bw), self.dtype, scattered=True)
        if self.transposed:   # memory view block [N, K]
            return TensorDescType((self.bw * self.tn, self.bh), self.dtype)
        return TensorDescType((self.lh, self.bw), self.dtype, array_length=self.al)


@dataclass
class TileDescs:
    plan: TilePlan
    descs: list[Value]


# ----------------------------------------------------------------------------------------------
# Analysis: tile classes and roles
# ----------------------------------------------------------------------------------------------


class _UnionFind:
    def __init__(self):
        self.parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)


def _tile_classes(fn: Function) -> tuple[_UnionFind, dict[int, set], dict[int, Operation]]:
    """Union tile values that are the same tile moving (update, loop carry); collect per class
    the roles its loads play and one op for error messages."""
    uf = _UnionFind()
    for op in fn.walk():
        if op.name == "xetile.update_tile_offset":
            uf.union(id(op.result), id(op.operands[0]))
        elif op.name == "scf.for":
            body = op.regions[0].block
            term = body.terminator
            for k, init in enumerate(op.operands[3:]):
                if isinstance(init.type, TileType):
                    uf.union(id(body.args[k + 1]), id(init))
                    uf.union(id(op.results[k]), id(init))
                    uf.union(id(term.operands[k]), id(init))
    roles: dict[int, set] = {}
    where: dict[int, Operation] = {}
    for op in fn.walk():
        if op.name in ("xetile.load_tile", "xetile.store_tile", "xetile.prefetch_tile"):
            tile = op.operands[0] if op.name != "xetile.store_tile" else op.operands[1]
            c = uf.find(id(tile))
            where.setdefault(c, op)
            rs = roles.setdefault(c, set())
            if op.name == "xetile.load_tile":
                for user, i in op.result.uses:
                    if user.name == "xetile.tile_mma" and i < 2:
                        rs.add("AB"[i])
                    else:
                        rs.add("C")
            elif op.name == "xetile.store_tile":
                rs.add("S")
        elif op.name == "xetile.atomic_rmw_tile":
            c = uf.find(id(op.operands[1]))
            where.setdefault(c, op)
            roles.setdefault(c, set()).add("X")
    return uf, roles, where


# ----------------------------------------------------------------------------------------------
# The pass
# ----------------------------------------------------------------------------------------------


def operand_plan(target: Target, role: str, shape: tuple[int, int], dt: Any, k: int,
                 arr: ArrayType, blocks_per_load: Optional[int] = None) -> TilePlan:
    """How one subgroup tile of ``role`` (A, B: DPAS operands with DPAS depth ``k``; C: plain
    blocks) of ``arr`` is read on ``target``: register blocks, 2D block loads (height, array
    length, transposed blocks per load) or per-element gathers with the reason. The autotuner's
    perf model counts a k-step's load messages from it (``len(plan.desc_origins())``).
    ``blocks_per_load`` asks for that many DPAS B blocks per transposed load (default
    ``TRANSPOSED_B_BLOCKS_PER_LOAD``; halved until the block is legal, so a large value gives the
    fewest loads). Raises ValueError when the tile does not split into the role's register blocks."""
    R, C = shape
    bits = dt.bitwidth
    colmajor = arr.rank == 2 and tuple(arr.order) == (0, 1)
    lim = target.block_io
    n = target.dpas.n
    if role == "A":
        bh, bw = min(8, R), k
    elif role == "B":
        bh, bw = k, n
    else:
        bh, bw = min(8, R), min(n, C)
    if R % bh or C % bw or (role != "C" and bh & (bh - 1)):
        raise ValueError(f"tile {R}x{C} of {dt} does not split into {bh}x{bw} blocks for the "
                         f"{role} operand of a DPAS on {target.name}")
    packed = role == "B" and bits < 32
    plan = TilePlan(role, "2d", (R, C), dt, bh, bw, packed=packed)

    def fallback(reason: str) -> TilePlan:
        return TilePlan(role, "gather", (R, C), dt, bh, bw, packed=packed, reason=reason)

    if colmajor:
        if role != "B":
            return fallback("column-major tile: 2D block loads of a column-major "
                            f"{'A operand' if role == 'A' else 'tile'} are not supported (transposed "
                            "loads are used for B only)")
        # 8- and 16-bit B: a transposed load of 32-bit units; a unit holds consecutive K
        # elements of one column, lower K in the lower bits -- exactly the DPAS B (VNNI) layout.
        plan.transposed = True
        plan.lh, plan.al = bh, 1
        if lim is not None:
            why = check_block_shape(target, 32, bh * bits // 32, bw, 1, op="load_transpose")
            if why:
                return fallback(why)
            # A transposed load is at most 8 words wide (one DPAS B block deep), so the
            # fewest loads come from its height: 2 x N rows give two B blocks side by side.
            tn = TRANSPOSED_B_BLOCKS_PER_LOAD if blocks_per_load is None else blocks_per_load
            while tn > 1 and ((C // bw) % tn or check_block_shape(target, 32, bh * bits // 32,
                                                                   tn * bw, 1, op="load_transpose")):
                tn //= 2
            plan.tn = tn
    else:
        plan.lh = min(R, 32)
        if plan.lh % bh or R % plan.lh:
            plan.lh = bh
        max_c = 4 if bits < 32 else 2
        if lim is not None:
            max_c = lim.max_count if bits < 32 else lim.max_count_32bit
        al = 1
        while al * 2 <= max_c and (al * 2) * bw * bits // 8 <= 64 and (C // bw) % (al * 2) == 0:
            al *= 2
        plan.al = al
        if lim is not None:
            kind = "load_transform" if packed else "load"
            why = check_block_shape(target, bits, bw, plan.lh, al, op=kind)
            if why:
                return fallback(why)
    if lim is not None and not arr.aligned16:
        return fallback("array base or pitch is not 16-byte aligned (2D block IO needs a pitch "
                        "multiple of 16 bytes)")
    return plan


class _Blocker:
    def __init__(self, fn: Function, target: Target, report: BlockingReport):
        if target.dpas is None:
            raise CompilerError(f"blocking needs a DPAS target, got {target.name!r}")
        self.fn, self.target, self.report = fn, target, report
        self.n = target.dpas.n
        self.uf, self.roles, self.where = _tile_classes(fn)
        self.plans: dict[int, TilePlan] = {}
        self.env: dict[int, Any] = {}
        self.b = Builder()

    # -- helpers ---------------------------------------------------------------------------

    def err(self, op: Operation, msg: str) -> CompilerError:
        return CompilerError(msg, op)

    def create(self, name, operands=(), types=(), attrs=None, loc=None) -> Operation:
        return self.b.create(name, list(operands), list(types), attrs, loc=loc)

    def const_index(self, v: int) -> Value:
        return self.create("arith.constant", [], [index], {"value": int(v)}).result

    def add_index(self, a: Value, k: int) -> Value:
        if k == 0:
            return a
        return self.create("arith.addi", [a, self.const_index(k)], [index]).result

    def c_block(self, op: Operation, shape) -> tuple[int, int]:
        R, C = shape
        bh, bw = min(8, R), min(self.n, C)
        if R % bh or C % bw or bh & (bh - 1):
            raise self.err(op, f"a subgroup tile of {R}x{C} does not split into {bh}x{bw} register "
                               f"blocks on {self.target.name} (use multiples of 8 rows and {self.n} "
                               f"columns, or fewer than 8 rows as a power of two)")
        return bh, bw

    def k_of(self, op: Operation, dtype) -> int:
        k = self.target.dpas.k_of(dpas_type_name(dtype)) if dtype.name in ("bf16", "f16", "f32", "i8", "u8") else None
        if k is None and dtype == f32:
            return 8     # full-precision f32 has no DPAS: a software multiply-accumulate in tf32's shape
        if k is None:
            raise self.err(op, f"target {self.target.name!r} has no DPAS for {dtype}")
        return k

    # -- tile plans --------------------------------------------------------------------------

    def plan_for(self, init: Operation) -> TilePlan:
        c = self.uf.find(id(init.result))
        if c in self.plans:
            return self.plans[c]
        t: TileType = init.result.type
        arr: ArrayType = init.operands[0].type
        if t.scatter:
            raise self.err(init, "scatter tiles (load_gather/store_scatter) are not supported on DPAS "
                                 "targets yet")
        if not self.roles.get(c) and arr.rank == 2 and tuple(arr.order) == (0, 1):
            # a prefetch-only column-major tile: prefetch its memory view [C, R] in plain blocks
            R, C = t.shape
            view = TileType((C, R), t.dtype, t.order, t.layout, False)
            plan = self._make_plan(init, view, ArrayType(arr.dtype, 2, (1, 0), arr.aligned16), "C")
            if plan.kind == "2d":
                plan.swapped, plan.shape = True, (R, C)
            self.plans[c] = plan
            return plan
        roles = self.roles.get(c) or {"C"}     # a prefetch-only tile: plain blocks
        if "X" in roles:
            if roles != {"X"}:
                raise self.err(self.where.get(c, init), "a tile used by atomic_rmw_tile is also loaded or "
                                                        "stored; use a separate init_tile for the atomics")
            bh, bw = self.c_block(init, t.shape)
            # atomics are per element: block-scattered descriptors, one per register block
            self.plans[c] = plan = TilePlan("C", "gather", tuple(t.shape), t.dtype, bh, bw)
            return plan
        if "S" in roles and roles <= {"S", "C"}:
            self.plans[c] = plan = self.store_plan(init, t, arr)
            return plan
        if len(roles) > 1:
            raise self.err(self.where.get(c, init), f"a tile is loaded for different uses ({sorted(roles)}): "
                                                    "as a tile_mma A/B operand it is blocked for the "
                                                    "DPAS; load it separately for other uses")
        role = next(iter(roles))
        self.plans[c] = plan = self._make_plan(init, t, arr, role)
        return plan

    def _make_plan(self, op: Operation, t: TileType, arr: ArrayType, role: str) -> TilePlan:
        k = self.k_of(op, t.dtype) if role in ("A", "B") else 0
        if role == "C":
            self.c_block(op, t.shape)
        try:
            return operand_plan(self.target, role, t.shape, t.dtype, k, arr)
        except ValueError as e:
            raise self.err(op, str(e)) from None

    def store_plan(self, op: Operation, t: TileType, arr: ArrayType) -> TilePlan:
        R, C = t.shape
        bh, bw = self.c_block(op, t.shape)
        plan = TilePlan("C", "2d", (R, C), t.dtype, bh, bw, lh=bh, al=1)
        reason = ""
        if arr.rank == 2 and tuple(arr.order) == (0, 1):
            reason = "column-major tile: 2D block stores write row-major blocks only"
        elif self.target.block_io is not None:
            reason = check_block_shape(self.target, t.dtype.bitwidth, bw, bh, 1, op="store") or ""
            if not reason and not arr.aligned16:
                reason = ("array base or pitch is not 16-byte aligned (2D block IO needs a pitch "
                          "multiple of 16 bytes)")
        if reason:
            return TilePlan("C", "gather", (R, C), t.dtype, bh, bw, reason=reason)
        return plan

    def make_descs(self, plan: TilePlan, arr: Value, r0: Value, c0: Value, loc) -> list[Value]:
        out = []
        ty = plan.desc_type()
        for (i, j) in plan.desc_origins():
            r, c = self.add_index(r0, i), self.add_index(c0, j)
            if plan.kind == "gather":
                out.append(self.create("xegpu.create_tdesc", [arr, r, c], [ty], loc=loc).result)
            elif plan.transposed or plan.swapped:
                out.append(self.create("xegpu.create_nd_tdesc", [arr, c, r], [ty], loc=loc).result)
            else:
                out.append(self.create("xegpu.create_nd_tdesc", [arr, r, c], [ty], loc=loc).result)
        return out

    # -- op handlers ------------------------------------------------------------------------

    def run(self) -> Function:
        fn = self.fn
        new = Function(fn.name, [a.type for a in fn.args], list(fn.arg_names),
                       dict(fn.attributes, level="xegpu"), fn.loc)
        for a, na in zip(fn.args, new.args):
            self.env[id(a)] = na
        self.b = Builder.at_end(new.entry)
        self.block(fn.entry)
        return new

    def block(self, blk: Block) -> Optional[list]:
        for op in blk.ops:
            if op.name == "scf.yield":
                return [self.env[id(v)] for v in op.operands]
            if op.name == "func.return":
                self.create("func.return", loc=op.loc)
                return None
            self.op(op)
        return None

    def op(self, op: Operation) -> None:
        n = op.name
        h = getattr(self, "op_" + n.replace(".", "_"), None)
        if h is not None:
            h(op)
            return
        if all(not isinstance(v.type, (VectorType, TileType)) for v in [*op.operands, *op.results]) \
                and not op.regions:
            if n.startswith("xetile."):
                raise self.err(op, "not supported on DPAS targets")
            new = self.create(n, [self.env[id(v)] for v in op.operands], [r.type for r in op.results],
                              dict(op.attributes), loc=op.loc)
            for r, nr in zip(op.results, new.results):
                nr.name_hint = r.name_hint
                self.env[id(r)] = nr
            return
        if n in xt.FLOAT_BINARY + xt.INT_BINARY + xt.FLOAT_UNARY + xt.INT_UNARY + xt.CASTS + (
                "arith.cmpf", "arith.cmpi", "arith.select"):
            self.elementwise(op)
            return
        raise self.err(op, f"'{n}' is not supported on DPAS targets ({self.target.name}) yet")

    def vblocks(self, op: Operation, v: Value) -> VBlocks:
        x = self.env[id(v)]
        if not isinstance(x, VBlocks):
            raise self.err(op, f"operand {v!r} is not a blocked vector")
        return x

    def elementwise(self, op: Operation) -> None:
        ins = [self.vblocks(op, v) for v in op.operands]
        ref = ins[0]
        for x in ins[1:]:
            if (x.bh, x.bw, x.shape, x.packed) != (ref.bh, ref.bw, ref.shape, ref.packed):
                raise self.err(op, "operands are blocked differently (a DPAS operand used in "
                                   "element-wise code is not supported on DPAS targets yet)")
        if ref.packed:
            raise self.err(op, "element-wise ops on a DPAS B operand are not supported yet")
        rdt = op.result.type.dtype
        grid = []
        for i in range(len(ref.grid)):
            row = []
            for j in range(len(ref.grid[0])):
                blk_ty = VectorType(tuple(ref.grid[i][j].type.shape), rdt)
                row.append(self.create(op.name, [x.grid[i][j] for x in ins], [blk_ty],
                                       {k: v for k, v in op.attributes.items() if k != "layout"},
                                       loc=op.loc).result)
            grid.append(row)
        self.env[id(op.result)] = VBlocks(ref.shape, ref.bh, ref.bw, grid)

    def splat_blocks(self, op: Operation, shape, dtype, make) -> VBlocks:
        bh, bw = self.c_block(op, shape)
        R, C = shape
        grid = [[make(VectorType((bh, bw), dtype)) for _ in range(C // bw)] for _ in range(R // bh)]
        return VBlocks((R, C), bh, bw, grid)

    def op_arith_constant(self, op: Operation) -> None:
        t = op.result.type
        if not isinstance(t, VectorType):
            self.env[id(op.result)] = self.create("arith.constant", [], [t], dict(op.attributes),
                                                  loc=op.loc).result
            return
        cache: dict = {}

        def make(bt):   # one constant per block type, shared by all blocks
            if bt not in cache:
                cache[bt] = self.create("arith.constant", [], [bt], {"value": op.attributes["value"]},
                                        loc=op.loc).result
            return cache[bt]
        self.env[id(op.result)] = self.splat_blocks(op, t.shape, t.dtype, make)

    def op_vector_splat(self, op: Operation) -> None:
        s = self.env[id(op.operands[0])]
        t = op.result.type
        self.env[id(op.result)] = self.splat_blocks(
            op, t.shape, t.dtype, lambda bt: self.create("vector.splat", [s], [bt], loc=op.loc).result)

    def op_xetile_tile_broadcast(self, op: Operation) -> None:
        src = self.vblocks(op, op.operands[0])
        t = op.result.type
        dims = list(op.attributes.get("dims", []))
        bh, bw = self.c_block(op, t.shape)
        if dims == [1] and src.shape[1] == 1:      # a column [m, 1] -> [m, n]
            if src.bh != bh:
                raise self.err(op, "broadcast source and result are blocked differently")
            R, C = t.shape
            self.env[id(op.result)] = VBlocks((R, C), bh, bw, [
                [self.create("xetile.tile_broadcast", [src.grid[i][0]], [VectorType((bh, bw), t.dtype)],
                             {"dims": [1]}, loc=op.loc).result] * (C // bw) for i in range(R // bh)])
            return
        if dims != [0] or src.shape[0] != 1:
            raise self.err(op, "only broadcasting a row ([1, n] -> [m, n]) or a column is supported "
                               "on DPAS targets")
        if src.bw != bw:
            raise self.err(op, "broadcast source and result are blocked differently")
        R, C = t.shape
        cols = [self.create("xetile.tile_broadcast", [src.grid[0][j]], [VectorType((bh, bw), t.dtype)],
                            {"dims": [0]}, loc=op.loc).result for j in range(C // bw)]
        self.env[id(op.result)] = VBlocks((R, C), bh, bw, [list(cols) for _ in range(R // bh)])

    def op_xetile_init_tile(self, op: Operation) -> None:
        if op.result.type.scatter:
            self.scatter_tile(op)
            return
        arr = self.env[id(op.operands[0])]
        r0, c0 = (self.env[id(v)] for v in op.operands[1:])
        plan = self.plan_for(op)
        descs = self.make_descs(plan, arr, r0, c0, op.loc)
        wg = op.attributes.get("wg_tile")
        if wg is not None and plan.kind != "gather" and not (plan.transposed or plan.swapped):
            for d, (i, j) in zip(descs, plan.desc_origins()):   # + the descriptor's offset in the tile
                d.op.attributes["wg_tile"] = list(wg) + [i, j]
        self.env[id(op.result)] = TileDescs(plan, descs)

    def scatter_tile(self, op: Operation) -> None:
        """A tile of per-element offsets: one scattered descriptor per register block."""
        t: TileType = op.result.type
        offs = self.vblocks(op, op.operands[1])
        bh, bw = self.c_block(op, t.shape)
        if (offs.bh, offs.bw) != (bh, bw):
            raise self.err(op, "offsets are blocked differently from the tile")
        arr = self.env[id(op.operands[0])]
        ty = TensorDescType((bh, bw), t.dtype, scattered=True)
        grid = [[self.create("xegpu.create_tdesc", [arr, o], [ty], loc=op.loc).result for o in row]
                for row in offs.grid]
        self.env[id(op.result)] = VBlocks(t.shape, bh, bw, grid)

    def op_xetile_load_gather(self, op: Operation) -> None:
        tiles = self.env[id(op.operands[0])]
        mask = self.vblocks(op, op.operands[1])
        t = op.result.type
        attrs = {"padding": op.attributes["padding"]} if op.attributes.get("padding", 0) != 0 else {}
        grid = [[self.create("xegpu.load_gather", [d, m], [VectorType((tiles.bh, tiles.bw), t.dtype)],
                             dict(attrs), loc=op.loc).result for d, m in zip(dr, mr)]
                for dr, mr in zip(tiles.grid, mask.grid)]
        self.report.add(op, "gather")
        self.env[id(op.result)] = VBlocks(t.shape, tiles.bh, tiles.bw, grid)

    def op_xetile_store_scatter(self, op: Operation) -> None:
        val = self.vblocks(op, op.operands[0])
        mask = self.vblocks(op, op.operands[1])
        tiles = self.env[id(op.operands[2])]
        for vr, mr, dr in zip(val.grid, mask.grid, tiles.grid):
            for v, m, d in zip(vr, mr, dr):
                self.create("xegpu.store_scatter", [v, d, m], [], loc=op.loc)
        self.report.add(op, "scatter")

    def op_vector_step(self, op: Operation) -> None:
        t = op.result.type
        bh, bw = self.c_block(op, t.shape)
        along_cols = t.shape[0] == 1
        vt = VectorType((bh, bw), t.dtype)
        grid = []
        for i in range(t.shape[0] // bh):
            row = []
            for j in range(t.shape[1] // bw):
                v = self.create("vector.step", [], [vt], loc=op.loc).result
                start = j * bw if along_cols else i * bh
                if start:
                    c = self.create("arith.constant", [], [vt], {"value": start}, loc=op.loc).result
                    v = self.create("arith.addi", [v, c], [vt], loc=op.loc).result
                row.append(v)
            grid.append(row)
        self.env[id(op.result)] = VBlocks(t.shape, bh, bw, grid)

    def op_xetile_update_tile_offset(self, op: Operation) -> None:
        td: TileDescs = self.env[id(op.operands[0])]
        dr, dc = (self.env[id(v)] for v in op.operands[1:])
        if td.plan.transposed or td.plan.swapped:
            dr, dc = dc, dr
        out = [self.create("xegpu.update_nd_offset", [d, dr, dc], [d.type], loc=op.loc).result
               for d in td.descs]
        self.env[id(op.result)] = TileDescs(td.plan, out)

    def op_xetile_prefetch_tile(self, op: Operation) -> None:
        td: TileDescs = self.env[id(op.operands[0])]
        if td.plan.kind == "gather":
            self.report.add(op, "none", f"prefetch dropped: the tile uses gather loads ({td.plan.reason})")
            return
        rng = op.attributes.get("subgroups")
        for d in td.descs:
            self.create("xegpu.prefetch_nd", [d], [], {"subgroups": rng} if rng else {}, loc=op.loc)
        self.report.add(op, "2d_block_prefetch")

    def op_xetile_load_tile(self, op: Operation) -> None:
        td: TileDescs = self.env[id(op.operands[0])]
        p = td.plan
        pad = op.attributes.get("padding", 0)
        R, C = p.shape
        attrs: dict = {}
        if pad != 0:
            attrs["padding"] = pad
        nr, nc = R // p.bh, C // p.bw
        grid: list[list[Any]] = [[None] * nc for _ in range(nr)]
        if p.kind == "gather":
            self._fallback(op, p.reason)
            for d, (i, j) in zip(td.descs, p.desc_origins()):
                a = dict(attrs, packed=True) if p.packed else attrs
                shape = (p.bh // vnni_factor(p.dtype), p.bw, vnni_factor(p.dtype)) if p.packed else (p.bh, p.bw)
                grid[i // p.bh][j // p.bw] = self.create(
                    "xegpu.load_gather", [d], [VectorType(shape, p.dtype)], a, loc=op.loc).result
        elif p.transposed:
            self.report.add(op, "2d_block_load_transpose")
            a = dict(attrs, transpose=[1, 0])
            if p.dtype.bitwidth < 32:
                a["transpose_bit_width"] = 32
            if p.tn > 1:
                a["transpose_blocks"] = p.tn
            for d, (i, j) in zip(td.descs, p.desc_origins()):
                tys = load_result_types(d.type, False, True, a.get("transpose_bit_width"), p.tn)
                res = self.create("xegpu.load_nd", [d], tys, a, loc=op.loc).results
                for k, r in enumerate(res):
                    grid[i // p.bh][j // p.bw + k] = r
        else:
            self.report.add(op, "2d_block_load_transform" if p.packed else "2d_block_load")
            a = dict(attrs, packed=True) if p.packed else attrs
            v = vnni_factor(p.dtype) if p.packed else 1
            for d, (i, j) in zip(td.descs, p.desc_origins()):
                tys = load_result_types(d.type, p.packed)
                res = self.create("xegpu.load_nd", [d], tys, a, loc=op.loc).results
                for k, r in enumerate(res):
                    jj = j // p.bw + k
                    for q in range(p.lh // p.bh):
                        if p.lh == p.bh:
                            blk = r
                        else:
                            shp = (p.bh // v,) + tuple(r.type.shape[1:])
                            blk = self.create("vector.extract_strided_slice", [r], [VectorType(shp, p.dtype)],
                                              {"offsets": [q * p.bh // v], "sizes": [p.bh // v]},
                                              loc=op.loc).result
                        grid[i // p.bh + q][jj] = blk
        self.env[id(op.result)] = VBlocks((R, C), p.bh, p.bw, grid, packed=p.packed)

    def _fallback(self, op: Operation, reason: str) -> None:
        if strict_mode():
            raise self.err(op, f"cannot use 2D block IO on {self.target.name}: {reason} "
                               f"(XEJIT_STRICT=1 forbids the gather/scatter fallback)")
        self.report.add(op, "gather" if "load" in op.name else "scatter", reason)

    def op_xetile_store_tile(self, op: Operation) -> None:
        val = self.vblocks(op, op.operands[0])
        td: TileDescs = self.env[id(op.operands[1])]
        p = td.plan
        if p.role != "C" or (val.bh, val.bw) != (p.bh, p.bw):
            raise self.err(op, "stored value and tile are blocked differently")
        if p.kind == "gather":
            self._fallback(op, p.reason)
        else:
            self.report.add(op, "2d_block_store")
        for d, (i, j) in zip(td.descs, p.desc_origins()):
            blk = val.grid[i // p.bh][j // p.bw]
            self.create("xegpu.store_scatter" if p.kind == "gather" else "xegpu.store_nd", [blk, d], [],
                        loc=op.loc)

    def op_xetile_tile_mma(self, op: Operation) -> None:
        a_v, b_v = op.operands[0], op.operands[1]
        for v, nm in ((a_v, "A"), (b_v, "B")):
            prod = getattr(v, "op", None)
            if prod is None or prod.name not in ("xetile.load_tile", "gpu.slm_load"):
                raise self.err(op, f"the {nm} operand must come straight from load_tile (or from "
                                   f"tile_transpose / convert_layout, read from SLM) on DPAS targets "
                                   f"(it is blocked and packed for the DPAS by its load)")
        a, b = self.vblocks(op, a_v), self.vblocks(op, b_v)
        dt = a_v.type.dtype
        prec = op.attributes.get("input_precision")
        software = dt == f32 and (prec != "tf32" or self.target.dpas.k_of("tf32") is None)
        if software:      # no DPAS: FMAs with subgroup shuffles, reported
            why = ("f32 tile_mma with input_precision='ieee' has no DPAS" if prec != "tf32" else
                   f"target {self.target.name} has no tf32 DPAS")
            if strict_mode():
                raise self.err(op, f"{why} (XEJIT_STRICT=1 forbids the FMA fallback)")
            self.report.add(op, "fma (software multiply-accumulate, no DPAS)", why + "; use bf16/fp16 "
                            "inputs or input_precision='tf32' for the matrix engine")
        M, N = op.result.type.shape
        bh, bw = self.c_block(op, (M, N))
        if (a.bh, b.bw) != (bh, bw) or a.bw != b.bh:
            raise self.err(op, "tile_mma operands are blocked inconsistently")
        acc = self.vblocks(op, op.operands[2]) if len(op.operands) == 3 else None
        rt = op.result.type.dtype
        attrs = {"input_precision": "tf32"} if prec == "tf32" else {}
        if software:
            attrs["software"] = True
        grid = []
        nk = len(a.grid[0])
        for i in range(M // bh):
            row = []
            for j in range(N // bw):
                c = acc.grid[i][j] if acc is not None else None
                for k in range(nk):
                    ops = [a.grid[i][k], b.grid[k][j]] + ([c] if c is not None else [])
                    c = self.create("xegpu.dpas", ops, [VectorType((bh, bw), rt)], dict(attrs),
                                    loc=op.loc).result
                    self.report.dpas_total += 0 if software else 1
                row.append(c)
            grid.append(row)
        self.env[id(op.result)] = VBlocks((M, N), bh, bw, grid)

    def op_xetile_tile_reduce(self, op: Operation) -> None:
        """Within the subgroup: along dim 1 the blocks of a row are combined element-wise first,
        then one ``xetile.tile_reduce`` [bh, bw] -> [bh, 1] per row of blocks (lowered with
        in-lane combines and subgroup shuffles: one cross-lane reduction per row of blocks, not
        one per block -- shuffles are the costly part, on the CPU device's driver most of all);
        along dim 0 one reduce per block [bh, bw] -> [1, bw] (in-lane), the blocks of a column
        combined. (Reductions split over subgroups arrive here as per-subgroup reduces plus an
        SLM exchange, see wg_to_sg.)"""
        src = self.vblocks(op, op.operands[0])
        kind = op.attributes["kind"]
        dims = list(op.attributes.get("dims", []))
        if dims not in ([0], [1]):
            raise self.err(op, f"tile_reduce over dims {dims} is not supported on DPAS targets")
        if src.packed:
            raise self.err(op, "tile_reduce of a DPAS B operand is not supported")
        et = op.result.type.dtype
        comb = REDUCE_OP[kind][0 if et.is_float else 1]
        if comb is None:
            raise self.err(op, f"tile_reduce <{kind}> on {et} is not supported")
        if not et.is_float and not et.is_signed and kind in ("max", "min"):
            comb = "arith.maxui" if kind == "max" else "arith.minui"
        R, C = src.shape
        grid = src.grid if dims == [1] else [list(col) for col in zip(*src.grid)]
        bt = VectorType((src.bh, 1) if dims == [1] else (1, src.bw), et)
        out = []
        for line in grid:
            if dims == [1]:
                blk_t = VectorType((src.bh, src.bw), et)
                acc = line[0]
                for blk in line[1:]:
                    acc = self.create(comb, [acc, blk], [blk_t], loc=op.loc).result
                line = [acc]
            acc = None
            for blk in line:
                part = self.create("xetile.tile_reduce", [blk], [bt], {"kind": kind, "dims": dims},
                                   loc=op.loc).result
                acc = part if acc is None else self.create(comb, [acc, part], [bt], loc=op.loc).result
            out.append(acc)
        self.report.add(op, "subgroup reduction (shuffles)" if dims == [1] else
                        "subgroup reduction (in-lane)")
        if dims == [1]:
            self.env[id(op.result)] = VBlocks((R, 1), src.bh, 1, [[x] for x in out])
        else:
            self.env[id(op.result)] = VBlocks((1, C), 1, src.bw, [out])

    # -- shared local memory (data moving between subgroups, see wg_to_sg) ------------------------

    def op_gpu_slm_alloc(self, op: Operation) -> None:
        new = self.create(op.name, [], [op.result.type], dict(op.attributes), loc=op.loc)
        self.env[id(op.result)] = new.result

    def op_gpu_barrier(self, op: Operation) -> None:
        self.create(op.name, [], [], loc=op.loc)

    def op_gpu_slm_store(self, op: Operation) -> None:
        """One store per register block, at the window offset plus the block's."""
        val = self.vblocks(op, op.operands[0])
        if val.packed:
            raise self.err(op, "a DPAS B operand (VNNI-packed) cannot be moved through SLM")
        buf, r0, c0 = (self.env[id(v)] for v in op.operands[1:])
        for i, row in enumerate(val.grid):
            for j, blk in enumerate(row):
                self.create(op.name, [blk, buf, self.add_index(r0, i * val.bh),
                                      self.add_index(c0, j * val.bw)], [], loc=op.loc)
        self.report.add(op, "SLM store (per lane)")

    def op_gpu_slm_load(self, op: Operation) -> None:
        """The result in register blocks [min(8, R), min(N, C)]; block (i, j) of a transposed
        window at (r0, c0) is buffer[r0 + j*bw : +bw, c0 + i*bh : +bh].T."""
        t: VectorType = op.result.type
        R, C = t.shape
        buf, r0, c0 = (self.env[id(v)] for v in op.operands)
        roles = {"AB"[i] if user.name == "xetile.tile_mma" and i < 2 else "C" for user, i in op.result.uses}
        if len(roles) > 1:
            raise self.err(op, f"a vector read from SLM has different uses ({sorted(roles)}): as a "
                               "tile_mma A/B operand it is read in DPAS blocks; convert it separately")
        role = next(iter(roles), "C")
        packed = False
        if role == "A":
            bh, bw = min(8, R), self.k_of(op, t.dtype)
        elif role == "B":
            bh, bw = self.k_of(op, t.dtype), self.n
            packed = t.dtype.bitwidth < 32
        else:
            bh, bw = self.c_block(op, t.shape)
        if R % bh or C % bw or bh & (bh - 1):
            raise self.err(op, f"a {R}x{C} {t.dtype} vector does not split into {bh}x{bw} blocks for "
                               f"the {role} operand of a DPAS on {self.target.name}")
        v = vnni_factor(t.dtype) if packed else 1
        bt = VectorType((bh // v, bw, v), t.dtype) if packed else VectorType((bh, bw), t.dtype)
        attrs = dict(op.attributes, packed=True) if packed else dict(op.attributes)
        tr = bool(op.attributes.get("transpose"))
        grid = []
        for i in range(R // bh):
            row = []
            for j in range(C // bw):
                r, c = (j * bw, i * bh) if tr else (i * bh, j * bw)
                row.append(self.create(op.name, [buf, self.add_index(r0, r), self.add_index(c0, c)],
                                       [bt], attrs, loc=op.loc).result)
            grid.append(row)
        self.report.add(op, "SLM load (per lane)" + (", transposed" if tr else "") +
                        (f", as DPAS {role} blocks" if role != "C" else "") + (", VNNI" if packed else ""))
        self.env[id(op.result)] = VBlocks(tuple(t.shape), bh, bw, grid, packed=packed)

    def op_xetile_atomic_rmw_tile(self, op: Operation) -> None:
        val = self.vblocks(op, op.operands[0])
        td: TileDescs = self.env[id(op.operands[1])]
        p = td.plan
        if p.kind != "gather" or (val.bh, val.bw) != (p.bh, p.bw) or val.packed:
            raise self.err(op, "atomic value and tile are blocked differently")

        mask = self.create("arith.constant", [], [VectorType((p.bh, p.bw), i1)], {"value": True},
                           loc=op.loc).result
        nr, nc = p.shape[0] // p.bh, p.shape[1] // p.bw
        grid: list[list[Any]] = [[None] * nc for _ in range(nr)]
        for d, (i, j) in zip(td.descs, p.desc_origins()):
            blk = val.grid[i // p.bh][j // p.bw]
            grid[i // p.bh][j // p.bw] = self.create("xegpu.atomic_rmw", [d, mask, blk], [blk.type],
                                                     {"kind": op.attributes["kind"]}, loc=op.loc).result
        self.report.add(op, "atomic_rmw (per lane)")
        self.env[id(op.result)] = VBlocks(p.shape, p.bh, p.bw, grid)

    # -- loops -------------------------------------------------------------------------------

    @staticmethod
    def _flatten(x) -> list[Value]:
        if isinstance(x, VBlocks):
            return x.flat()
        if isinstance(x, TileDescs):
            return list(x.descs)
        return [x]

    @staticmethod
    def _rebuild(like, vals: list[Value]):
        if isinstance(like, VBlocks):
            it = iter(vals)
            grid = [[next(it) for _ in row] for row in like.grid]
            return VBlocks(like.shape, like.bh, like.bw, grid, like.packed)
        if isinstance(like, TileDescs):
            return TileDescs(like.plan, list(vals))
        return vals[0]

    def op_scf_for(self, op: Operation) -> None:
        lb, ub, step = (self.env[id(v)] for v in op.operands[:3])
        inits = [self.env[id(v)] for v in op.operands[3:]]
        flat = [v for x in inits for v in self._flatten(x)]
        body = op.regions[0].block
        nb = Block([index] + [v.type for v in flat], [body.args[0].name_hint] + [None] * len(flat))
        self.env[id(body.args[0])] = nb.args[0]
        pos = 1
        for old, like in zip(body.args[1:], inits):
            k = len(self._flatten(like))
            self.env[id(old)] = self._rebuild(like, nb.args[pos:pos + k])
            pos += k
        saved = self.b
        self.b = Builder.at_end(nb)
        ys = self.block(body)
        yflat = []
        for y, like in zip(ys, inits):
            fy = self._flatten(y)
            if len(fy) != len(self._flatten(like)) or (isinstance(like, TileDescs) and
                                                       y.plan is not like.plan):
                raise self.err(op, "a loop-carried value changes its blocking inside the loop")
            yflat += fy
        self.b.create("scf.yield", yflat, [], loc=op.loc)
        self.b = saved
        new = Operation("scf.for", [lb, ub, step, *flat], [v.type for v in flat], dict(op.attributes),
                        [Region([nb])], op.loc)
        self.b.insert(new)
        pos = 0
        for r, like in zip(op.results, inits):
            k = len(self._flatten(like))
            self.env[id(r)] = self._rebuild(like, new.results[pos:pos + k])
            pos += k


def run(fn: Function, target: Target, report: Optional[BlockingReport] = None) -> Function:
    """Block a subgroup-level XeTile function into XeGPU IR for ``target`` (a DPAS target).

    Returns a new function (``level = "xegpu"``); ``report`` (if given) receives the
    instruction selection. Raises :class:`CompilerError` for unsupported ops or shapes.
    """
    report = report if report is not None else BlockingReport()
    return _Blocker(fn, target, report).run()


__all__ = ["run", "BlockingReport", "VBlocks", "TilePlan", "strict_mode"]
