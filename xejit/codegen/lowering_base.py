"""What the two LLVM lowerings share (``lower_generic``: per-lane registers for the CPU device;
``lower_xegpu``: DPAS and 2D block IO for Intel GPUs): dispatch of IR ops to ``op_<dialect>_<op>``
methods with the kernel's source line on every failure, builtin calls, float rounding, the
numeric rules of casts and integer division (the same on every target and in the interpreter),
the span check of gathers and scatters, reductions' combine and identity, and the CAS loop of
float atomics. A subclass sets ``module``, ``b`` (the IRBuilder) and ``target``, and adds what its
target's registers and instructions need.

Example:
    >>> from llvmlite import ir
    >>> wrap_signed(0xFFFF, 16), wrap_signed(-1 & 0xFF, 8)
    (-1, -1)
"""
from __future__ import annotations

from typing import Any, Callable

from llvmlite import ir

from ..errors import CompilerError
from ..ir.core import Operation, ScalarType, bf16, f16
from . import builtins as bi
from .builtins import F16, F32, I32, I64

I1 = ir.IntType(1)

__all__ = ["LoweringBase", "splat_like", "float_to_int", "floor_divide", "safe_int_division",
           "int_to_bool", "array_span", "in_span", "wrap_signed", "reg_type"]


def wrap_signed(v: int, bits: int) -> int:
    """``v`` wrapped to ``bits`` bits, as the signed number LLVM's constant syntax wants."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if bits > 1 and v >= 1 << (bits - 1) else v


def join_phis(b: ir.IRBuilder, a: list, a_block: ir.Block, other: list, other_block: ir.Block) -> list:
    """Where two branches meet: one phi per pair of values (``a`` from ``a_block``, ``other`` from
    ``other_block``), in order."""
    if len(a) != len(other):
        raise AssertionError(f"branches disagree on their values ({len(a)} vs {len(other)})")
    out = []
    for x, y in zip(a, other):
        phi = b.phi(x.type)
        phi.add_incoming(x, a_block)
        phi.add_incoming(y, other_block)
        out.append(phi)
    return out


def counted_loop(b: ir.IRBuilder, n: int, init: list, body, ty: ir.IntType = I32, name: str = "loop") -> list:
    """``for k in range(n)`` (``n >= 1``) as an LLVM loop with one block per step, carrying the
    values ``init``: ``body(k, values)`` emits a step and returns the next values (same types);
    returns the values after the loop, with the builder after it."""
    pre = b.block
    loop = b.function.append_basic_block(name)
    done = b.function.append_basic_block(name + ".done")
    b.branch(loop)
    b.position_at_end(loop)
    k = b.phi(ty, name="k")
    k.add_incoming(ty(0), pre)
    phis = []
    for v in init:
        phi = b.phi(v.type)
        phi.add_incoming(v, pre)
        phis.append(phi)
    out = body(k, phis)
    nxt = b.add(k, ty(1))
    latch = b.block
    k.add_incoming(nxt, latch)
    for phi, v in zip(phis, out, strict=True):
        phi.add_incoming(v, latch)
    b.cbranch(b.icmp_unsigned("<", nxt, ty(n)), loop, done)
    b.position_at_end(done)
    return out


def reg_type(t: ScalarType) -> ir.Type:
    """The register type of an element: floats are held as f32, ints in their width."""
    if t.is_float:
        return F32
    return ir.IntType(t.bitwidth)


def splat_like(x: ir.Value, ty: ir.Type, v) -> ir.Constant:
    """A constant of ``ty`` (scalar) shaped like ``x`` (scalar or vector)."""
    if isinstance(x.type, ir.VectorType):
        return ir.Constant(ir.VectorType(ty, x.type.count), [v] * x.type.count)
    return ir.Constant(ty, v)


def float_to_int(b: ir.IRBuilder, x: ir.Value, to: ir.IntType, signed: bool) -> ir.Value:
    """numpy-compatible where numpy defines it, saturating where it does not: truncate toward
    zero; to bool, ``x != 0`` (NaN is True); out of range, the type's min / max; NaN to 0. The
    same rule on every target and in the interpreter (``xetile_semantics.cast_value``)."""
    fty = x.type.element if isinstance(x.type, ir.VectorType) else x.type
    if to.width == 1:
        return b.fcmp_unordered("!=", x, splat_like(x, fty, 0.0))
    w = to.width
    lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if signed else (0, (1 << w) - 1)
    over = b.fcmp_ordered(">=", x, splat_like(x, fty, float(hi + 1)))    # powers of two: exact
    under = b.fcmp_ordered("<=", x, splat_like(x, fty, float(lo - 1) if signed else -1.0))   # trunc(lo - 1) does not fit
    nan = b.fcmp_unordered("uno", x, x)
    bad = b.or_(b.or_(over, under), nan)
    safe = b.select(bad, splat_like(x, fty, 0.0), x)
    rty = ir.VectorType(to, x.type.count) if isinstance(x.type, ir.VectorType) else to
    r = b.fptosi(safe, rty) if signed else b.fptoui(safe, rty)
    r = b.select(over, splat_like(x, to, hi), r)
    return b.select(under, splat_like(x, to, lo), r)


def floor_divide(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """Signed division rounding toward negative infinity (``arith.floordivsi``, Python's //)."""
    ity = y.type.element if isinstance(y.type, ir.VectorType) else y.type
    zero = splat_like(x, ity, 0)
    q, r = b.sdiv(x, y), b.srem(x, y)
    adj = b.and_(b.icmp_signed("!=", r, zero),
                 b.icmp_signed("!=", b.icmp_signed("<", r, zero), b.icmp_signed("<", y, zero)))
    return b.sub(q, b.zext(adj, x.type))


def safe_int_division(b: ir.IRBuilder, f, x: ir.Value, y: ir.Value, signed: bool) -> ir.Value:
    """``f(x, y)`` for an integer division or remainder with numpy's results where LLVM has
    undefined behaviour: a zero divisor gives 0 (numpy warns; the device cannot), and
    ``MIN // -1`` wraps to MIN (remainder 0). The divisor is replaced by 1 in both cases."""
    ity = y.type.element if isinstance(y.type, ir.VectorType) else y.type
    zero = b.icmp_signed("==", y, splat_like(y, ity, 0))
    bad = zero
    if signed:
        lowest = -(1 << (ity.width - 1))
        bad = b.or_(zero, b.and_(b.icmp_signed("==", x, splat_like(x, ity, lowest)),
                                 b.icmp_signed("==", y, splat_like(y, ity, -1))))
    r = f(x, b.select(bad, splat_like(y, ity, 1), y))
    return b.select(zero, splat_like(y, ity, 0), r)


def int_to_bool(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """numpy's int -> bool: ``x != 0`` (not the lowest bit)."""
    ity = x.type.element if isinstance(x.type, ir.VectorType) else x.type
    return b.icmp_unsigned("!=", x, splat_like(x, ity, 0))


def array_span(b: ir.IRBuilder, dims: list, strides: list) -> tuple[ir.Value, ir.Value]:
    """(lowest element offset, number of offsets up to the highest) an array of these i64 dims
    and strides reaches; 0 offsets for an empty array. Computed once per kernel; see
    :func:`in_span` for the check."""
    lo, hi, empty = I64(0), I64(0), ir.Constant(ir.IntType(1), 0)
    for d, st in zip(dims, strides):
        far = b.mul(b.sub(d, I64(1)), st)
        neg = b.icmp_signed("<", far, I64(0))
        lo = b.add(lo, b.select(neg, far, I64(0)))
        hi = b.add(hi, b.select(neg, I64(0), far))
        empty = b.or_(empty, b.icmp_signed("<=", d, I64(0)))
    return lo, b.select(empty, I64(0), b.add(b.sub(hi, lo), I64(1)))


def in_span(b: ir.IRBuilder, off: ir.Value, span: tuple[ir.Value, ir.Value]) -> ir.Value:
    """i1: element offset ``off`` (i64) lies in ``span`` (:func:`array_span`). One subtraction
    and one unsigned compare: below ``lo`` (or beyond by 2**63 and more) wraps to a huge number."""
    lo, count = span
    return b.icmp_unsigned("<", b.sub(off, lo), count)


class LoweringBase:
    """Dispatch, error context and the arithmetic both lowerings share (module docstring)."""

    module: ir.Module
    b: ir.IRBuilder
    target: Any
    #: appended to error messages (the generic lowering names its target)
    error_suffix = ""

    def err(self, op: Operation, msg: str) -> CompilerError:
        return CompilerError(msg + self.error_suffix, op)

    def handler_for(self, op: Operation) -> Callable[[Operation], Any]:
        """``op_<dialect>_<op>``, or ``op_elementwise`` for the ops of the shared table."""
        h = getattr(self, "op_" + op.name.replace(".", "_"), None)
        if h is not None:
            return h
        if op.name in bi.MATH or op.name in bi.BINARY or op.name in bi.UNARY:
            return self.op_elementwise
        raise self.err(op, f"'{op.name}' is not supported on {self.target.name}")

    def lower_op(self, op: Operation) -> Any:
        """Lower one op; any failure that is not already a CompilerError names the op and the
        user's source line (a lowering bug reported where it shows)."""
        handler = self.handler_for(op)
        try:
            return handler(op)
        except CompilerError:
            raise
        except Exception as e:
            raise CompilerError(f"lowering failed: {type(e).__name__}: {e}", op) from e

    def call(self, name: str, ret: ir.Type, args: list[ir.Value]) -> ir.Value:
        return bi.call(self.b, bi.declare(self.module, name, ret, [a.type for a in args]), args)

    def round_to(self, t: ScalarType, v: ir.Value) -> ir.Value:
        """Round an f32 register to the precision of ``t`` (bf16: nearest-even; f16: fptrunc)."""
        b = self.b
        if t == f16:
            return b.fpext(b.fptrunc(v, F16), F32)
        if t == bf16:
            bits = b.bitcast(v, I32)
            lsb = b.and_(b.lshr(bits, I32(16)), I32(1))
            r = b.and_(b.add(b.add(bits, I32(0x7FFF)), lsb), I32(0xFFFF0000 - (1 << 32)))
            isnan = b.fcmp_unordered("uno", v, v)
            return b.bitcast(b.select(isnan, I32(0x7FC00000), r), F32)
        return v

    def tf32(self, x):
        b = self.b
        u = b.bitcast(x, I32)
        r = b.and_(b.add(b.add(u, I32(0xFFF)), b.and_(b.lshr(u, I32(13)), I32(1))), I32(0xFFFFE000 - (1 << 32)))
        return b.bitcast(r, F32)

    def combine(self, kind: str, et: ScalarType, x, y):
        name = bi.REDUCE_OP[kind][0 if et.is_float else 1]
        b = self.b
        if name is None:
            raise CompilerError(f"reduction <{kind}> on {et} is not supported")
        if et.is_float:
            if name in bi.MATH:
                return self.round_to(et, self.call(bi.MATH[name][0], F32, [x, y]))
            return self.round_to(et, getattr(b, bi.BINARY[name][0])(x, y))
        sname = bi.BINARY[name][1 if et.is_signed else 2]
        if sname in ("smax", "smin", "umax", "umin"):
            cmp = b.icmp_signed if sname[0] == "s" else b.icmp_unsigned
            return b.select(cmp(">" if sname.endswith("max") else "<", x, y), x, y)
        return getattr(b, sname)(x, y)

    def identity(self, kind, et):
        if kind in ("max", "min"):
            if et.is_float:
                return ir.Constant(F32, float("-inf") if kind == "max" else float("inf"))
            bits = et.bitwidth
            if et.is_signed:
                v = -(1 << (bits - 1)) if kind == "max" else (1 << (bits - 1)) - 1
            else:
                v = 0 if kind == "max" else (1 << bits) - 1
            return ir.Constant(reg_type(et), wrap_signed(v, bits))
        v = bi.REDUCE_IDENTITY[kind]
        if et.is_float:
            return ir.Constant(F32, float(v))
        return ir.Constant(reg_type(et), wrap_signed(v, et.bitwidth))

    def reduce_rows_across_lanes(self, rows: list, kind: str, et: ScalarType, lane: ir.Value, sg: int,
                                 shuffle: Callable[[ir.Value, ir.Value], ir.Value]) -> tuple[ir.Value, int]:
        """Reduce each of ``rows`` (a lane's partial of each row, h <= sg of them) across the
        ``sg`` lanes; returns ``(v, shift)``: lane l holds the total of row ``l >> shift``.

        A transposing butterfly: each exchange (lane ^ d, d = sg/2 .. 1) halves the rows a lane
        still holds -- the lanes whose bit d is set keep the upper half and send the lower one --
        until one row is left, then plain butterfly steps finish it: h - 1 + log2(sg / h) + 1
        shuffles instead of h * log2(sg) (8 rows over 16 lanes: 8 instead of 32). Shuffles are
        what the CPU driver builds slowest (softmax's rows, attention's row maxima and sums).
        ``shuffle(value, lane)`` reads ``value`` from lane ``lane`` (i32)."""
        b = self.b
        n = 1
        while n < len(rows):
            n *= 2
        if n > sg:
            raise CompilerError(f"internal: {len(rows)} rows reduced over {sg} lanes")
        vals = list(rows) + [self.identity(kind, et)] * (n - len(rows))
        d = sg // 2
        while d >= 1:
            other = b.xor(lane, ir.Constant(lane.type, d))
            if len(vals) > 1:
                half = len(vals) // 2
                upper = b.icmp_unsigned("!=", b.and_(lane, ir.Constant(lane.type, d)), ir.Constant(lane.type, 0))
                nxt = []
                for lo, hi in zip(vals[:half], vals[half:]):
                    keep, send = b.select(upper, hi, lo), b.select(upper, lo, hi)
                    nxt.append(self.combine(kind, et, keep, shuffle(send, other)))
                vals = nxt
            else:
                vals = [self.combine(kind, et, vals[0], shuffle(vals[0], other))]
            d //= 2
        return vals[0], (sg // n).bit_length() - 1

    def cas_loop(self, ptr, v, kind):
        b = self.b
        init = b.bitcast(b.load(ptr, typ=F32), I32)
        pre = b.block
        loop = b.append_basic_block("cas")
        done = b.append_basic_block("cas_done")
        b.branch(loop)
        b.position_at_end(loop)
        cur = b.phi(I32)
        cur.add_incoming(init, pre)
        curf = b.bitcast(cur, F32)
        new = {"add": lambda: b.fadd(curf, v), "mul": lambda: b.fmul(curf, v),
               "max": lambda: self.call("_Z4fmaxff", F32, [curf, v]),
               "min": lambda: self.call("_Z4fminff", F32, [curf, v]), "xchg": lambda: v}[kind]()
        pair = b.cmpxchg(ptr, cur, b.bitcast(new, I32), "monotonic", "monotonic")
        seen = b.extract_value(pair, 0)
        okv = b.extract_value(pair, 1)
        cur.add_incoming(seen, loop)
        b.cbranch(okv, done, loop)
        b.position_at_end(done)
        return curf
