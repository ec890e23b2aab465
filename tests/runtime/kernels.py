"""Small llvmlite-built kernels for the runtime tests."""
from __future__ import annotations

from llvmlite import ir

from xejit.codegen import builtins as bi
from xejit.codegen.spirv import to_spirv

SG = 16


def vadd_f32() -> bytes:
    """c[i] = a[i] + alpha * b[i] for i < n (arguments: a, b, c, n: i32, alpha: f32)."""
    m = bi.new_module("vadd")
    fn = bi.kernel(m, "vadd", [bi.GLOBAL, bi.GLOBAL, bi.GLOBAL, bi.I32, bi.F32])
    a, b_, c, n, alpha = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    i = bi.global_id(b, 0)
    inside = b.icmp_signed("<", i, b.sext(n, bi.I64))
    with b.if_then(inside):
        x = b.load(b.gep(a, [i], source_etype=bi.F32), typ=bi.F32)
        y = b.load(b.gep(b_, [i], source_etype=bi.F32), typ=bi.F32)
        b.store(b.fadd(x, b.fmul(alpha, y)), b.gep(c, [i], source_etype=bi.F32))
    b.ret_void()
    return to_spirv(m)


def block_read_rotate() -> bytes:
    """Each subgroup block-reads 16 words at its offset; lane l writes the word of lane (l+1)%16."""
    m = bi.new_module("rotate")
    fn = bi.kernel(m, "rotate", [bi.GLOBAL, bi.GLOBAL], subgroup_size=SG)
    src, dst = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    gid = bi.global_id(b, 0)
    lane = bi.sub_group_local_id(b)
    base = b.sub(gid, b.zext(lane, bi.I64))                      # the subgroup's first element
    word = bi.block_read_u32(b, b.gep(src, [base], source_etype=bi.I32))
    nxt = b.urem(b.add(lane, bi.I32(1)), bi.I32(SG))
    rotated = bi.shuffle(b, b.bitcast(word, bi.F32), nxt, kind="f32")
    b.store(rotated, b.gep(dst, [gid], source_etype=bi.F32))
    b.ret_void()
    return to_spirv(m, ["SPV_INTEL_subgroups"])


def ids_2d() -> bytes:
    """out[y * X + x] = x + 1000 * y for global ids (x, y) = (dim 0, dim 1); X = global size 0."""
    m = bi.new_module("ids2d")
    fn = bi.kernel(m, "ids2d", [bi.GLOBAL])
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    x, y = bi.global_id(b, 0), bi.global_id(b, 1)
    width = bi.work_item(b, "global_size", 0)
    val = b.trunc(b.add(x, b.mul(y, bi.I64(1000))), bi.I32)
    b.store(val, b.gep(fn.args[0], [b.add(b.mul(y, width), x)], source_etype=bi.I32))
    b.ret_void()
    return to_spirv(m)
