"""Declaring SPIR-V kernels and OpenCL/SPIR-V builtins in an llvmlite module, and the table
from IR ops to LLVM instructions and builtins that both lowerings (and the passes) use.

Builtins are plain function declarations with Itanium-mangled names and the ``spir_func``
calling convention; LLVM's SPIR-V backend turns each into its SPIR-V instruction. The table
below is the single place where such names are spelled, so lowering code never mangles names.

Example:
    >>> from llvmlite import ir
    >>> m = ir.Module("k")
    >>> fn = kernel(m, "copy", [GLOBAL, GLOBAL], subgroup_size=16)
    >>> b = ir.IRBuilder(fn.append_basic_block())
    >>> i = global_id(b, 0)
    >>> v = b.load(b.gep(fn.args[0], [i], source_etype=F32), typ=F32)
    >>> _ = b.store(v, b.gep(fn.args[1], [i], source_etype=F32)); _ = b.ret_void()
    >>> from xejit.codegen.spirv import to_spirv, validate
    >>> validate(to_spirv(m))
"""
from __future__ import annotations

from collections.abc import Sequence

from llvmlite import ir

from .spirv import TRIPLE

I8, I16, I32, I64 = (ir.IntType(n) for n in (8, 16, 32, 64))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
VOID = ir.VoidType()
# OpenCL address spaces as LLVM's SPIR-V backend numbers them.
PRIVATE, GLOBAL_AS, CONSTANT_AS, LOCAL_AS, GENERIC_AS = 0, 1, 2, 3, 4
GLOBAL = ir.PointerType(addrspace=GLOBAL_AS)
LOCAL = ir.PointerType(addrspace=LOCAL_AS)

# Work-item queries: OpenCL C names (the backend maps them to SPIR-V builtin variables).
_WORK_ITEM = {
    "global_id": ("_Z13get_global_idj", I64, [I32]),
    "local_id": ("_Z12get_local_idj", I64, [I32]),
    "group_id": ("_Z12get_group_idj", I64, [I32]),
    "num_groups": ("_Z14get_num_groupsj", I64, [I32]),
    "local_size": ("_Z14get_local_sizej", I64, [I32]),
    "global_size": ("_Z15get_global_sizej", I64, [I32]),
    "sub_group_local_id": ("_Z22get_sub_group_local_idv", I32, []),
    "sub_group_id": ("_Z16get_sub_group_idv", I32, []),
    "sub_group_size": ("_Z18get_sub_group_sizev", I32, []),
}

# cl_intel_subgroups: shuffles by element type, block reads/writes of 32-bit words.
_SHUFFLE = {
    "f32": ("_Z23intel_sub_group_shufflefj", F32),
    "i32": ("_Z23intel_sub_group_shuffleij", I32),
    "u32": ("_Z23intel_sub_group_shufflejj", I32),
    "f16": ("_Z23intel_sub_group_shuffleDhj", F16),
    "i16": ("_Z23intel_sub_group_shufflesj", I16),
}
BLOCK_READ_U32 = "_Z30__spirv_SubgroupBlockReadINTELPU3AS1Kj"
BLOCK_WRITE_U32 = "_Z31__spirv_SubgroupBlockWriteINTELPU3AS1jj"
BLOCK_READ_U16 = "_Z30__spirv_SubgroupBlockReadINTELPU3AS1Kt"   # cl_intel_subgroups_short
BLOCK_READ_U8 = "_Z30__spirv_SubgroupBlockReadINTELPU3AS1Kh"    # cl_intel_subgroups_char
BLOCK_WRITE_U16 = "_Z31__spirv_SubgroupBlockWriteINTELPU3AS1tt"
BLOCK_WRITE_U8 = "_Z31__spirv_SubgroupBlockWriteINTELPU3AS1hh"
BARRIER = "_Z7barrierj"  # OpenCL barrier(flags)
CLK_LOCAL_MEM_FENCE, CLK_GLOBAL_MEM_FENCE = 1, 2


def new_module(name: str) -> ir.Module:
    """An empty module with the SPIR-V triple set."""
    m = ir.Module(name)
    m.triple = TRIPLE
    return m


def kernel(module: ir.Module, name: str, arg_types: Sequence[ir.Type],
           subgroup_size: int | None = None) -> ir.Function:
    """Define a ``spir_kernel`` returning void; ``subgroup_size`` becomes ``OpExecutionMode SubgroupSize``."""
    fn = ir.Function(module, ir.FunctionType(VOID, list(arg_types)), name)
    fn.calling_convention = "spir_kernel"
    if subgroup_size is not None:
        fn.set_metadata("intel_reqd_sub_group_size", module.add_metadata([I32(subgroup_size)]))
    return fn


def declare(module: ir.Module, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
    """Declare (once) an external ``spir_func`` builtin."""
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, list(args)), name)
        fn.calling_convention = "spir_func"
    return fn


def call(b: ir.IRBuilder, fn: ir.Function, args: Sequence[ir.Value], name: str = "") -> ir.Instruction:
    """Call ``fn`` with its own calling convention (a mismatch is undefined behaviour in LLVM)."""
    inst = b.call(fn, list(args), name=name)
    inst.calling_convention = fn.calling_convention
    return inst


def work_item(b: ir.IRBuilder, query: str, dim: int | None = None) -> ir.Value:
    """A work-item query by name (``global_id``, ``sub_group_local_id``, ...); see ``_WORK_ITEM``."""
    name, ret, args = _WORK_ITEM[query]
    fn = declare(b.module, name, ret, args)
    return call(b, fn, [I32(dim)] if args else [], name=query)


def global_id(b: ir.IRBuilder, dim: int) -> ir.Value:
    return work_item(b, "global_id", dim)


def local_id(b: ir.IRBuilder, dim: int) -> ir.Value:
    return work_item(b, "local_id", dim)


def group_id(b: ir.IRBuilder, dim: int) -> ir.Value:
    return work_item(b, "group_id", dim)


def sub_group_local_id(b: ir.IRBuilder) -> ir.Value:
    return work_item(b, "sub_group_local_id")


def sub_group_id(b: ir.IRBuilder) -> ir.Value:
    return work_item(b, "sub_group_id")


def pack_word(b: ir.IRBuilder, xs: list) -> ir.Value:
    """One 32-bit word of narrower integers ``xs``, the first in the lowest bits (VNNI / memory order)."""
    word = None
    for j, x in enumerate(xs):
        bits = x.type.width
        x = b.zext(x, I32) if bits < 32 else x
        x = b.shl(x, I32(j * bits)) if j else x
        word = x if word is None else b.or_(word, x)
    return word


def shuffle(b: ir.IRBuilder, value: ir.Value, lane: ir.Value, kind: str = "f32") -> ir.Value:
    """``intel_sub_group_shuffle(value, lane)``: read ``value`` from another lane of the subgroup."""
    name, ty = _SHUFFLE[kind]
    return call(b, declare(b.module, name, ty, [ty, I32]), [value, lane])


def block_read_u32(b: ir.IRBuilder, ptr: ir.Value) -> ir.Value:
    """Subgroup block read: lane ``i`` gets the 32-bit word ``ptr[i]`` (``ptr`` uniform, 4-byte aligned)."""
    return call(b, declare(b.module, BLOCK_READ_U32, I32, [GLOBAL]), [ptr])


def block_read_u16(b: ir.IRBuilder, ptr: ir.Value) -> ir.Value:
    """Subgroup block read of 16-bit words: lane ``i`` gets ``ptr[i]`` (``ptr`` uniform)."""
    return call(b, declare(b.module, BLOCK_READ_U16, I16, [GLOBAL]), [ptr])


def block_read_u8(b: ir.IRBuilder, ptr: ir.Value) -> ir.Value:
    """Subgroup block read of bytes: lane ``i`` gets ``ptr[i]`` (``ptr`` uniform)."""
    return call(b, declare(b.module, BLOCK_READ_U8, I8, [GLOBAL]), [ptr])


def block_write_u32(b: ir.IRBuilder, ptr: ir.Value, value: ir.Value) -> ir.Value:
    """Subgroup block write: lane ``i`` writes its 32-bit ``value`` to ``ptr[i]``."""
    return call(b, declare(b.module, BLOCK_WRITE_U32, VOID, [GLOBAL, I32]), [ptr, value])


def block_write_u16(b: ir.IRBuilder, ptr: ir.Value, value: ir.Value) -> ir.Value:
    """Subgroup block write of 16-bit words: lane ``i`` writes ``value`` to ``ptr[i]``."""
    return call(b, declare(b.module, BLOCK_WRITE_U16, VOID, [GLOBAL, I16]), [ptr, value])


def block_write_u8(b: ir.IRBuilder, ptr: ir.Value, value: ir.Value) -> ir.Value:
    """Subgroup block write of bytes: lane ``i`` writes ``value`` to ``ptr[i]``."""
    return call(b, declare(b.module, BLOCK_WRITE_U8, VOID, [GLOBAL, I8]), [ptr, value])


def slm_array(module: ir.Module, ty: ir.Type, n: int) -> ir.GlobalVariable:
    """A workgroup (shared local memory) array of ``n`` elements of ``ty``; its pointer is opaque,
    so GEPs name the element type."""
    arr_t = ir.ArrayType(ty, n)
    name = module.get_unique_name("slm")
    g = ir.GlobalVariable(module, arr_t, name, addrspace=LOCAL_AS)
    g.linkage = "internal"
    g.initializer = ir.Constant(arr_t, ir.Undefined)  # Workgroup variables take no initializer
    g.align = 16
    g.type = LOCAL
    return g


def barrier(b: ir.IRBuilder, flags: int = CLK_LOCAL_MEM_FENCE) -> ir.Value:
    """Workgroup barrier with the given memory fence flags."""
    return call(b, declare(b.module, BARRIER, VOID, [I32]), [I32(flags)])


# --- IR ops -> LLVM instructions and OpenCL builtins ----------------------------------------------
# One table for both lowerings and the passes. Float math is done in f32 (16-bit floats are
# widened and rounded back, like the interpreter).

#: float math ops -> (OpenCL builtin, arity)
MATH = {"math.exp": ("_Z3expf", 1), "math.exp2": ("_Z4exp2f", 1), "math.log": ("_Z3logf", 1),
             "math.log2": ("_Z4log2f", 1), "math.sqrt": ("_Z4sqrtf", 1), "math.rsqrt": ("_Z5rsqrtf", 1),
             "math.tanh": ("_Z4tanhf", 1), "math.sin": ("_Z3sinf", 1), "math.cos": ("_Z3cosf", 1),
             "math.erf": ("_Z3erff", 1), "math.absf": ("_Z4fabsf", 1), "math.floor": ("_Z5floorf", 1),
             "math.ceil": ("_Z4ceilf", 1), "arith.maxnumf": ("_Z4fmaxff", 2),
             "arith.minnumf": ("_Z4fminff", 2), "arith.remf": ("_Z4fmodff", 2),
             "math.powf": ("_Z3powff", 2)}

#: binary arith ops -> llvmlite IRBuilder method for (float, signed int, unsigned int) operands;
#: floordiv / smax / smin / umax / umin are built from several instructions
BINARY = {
    "arith.addf": ("fadd", None, None), "arith.subf": ("fsub", None, None),
    "arith.mulf": ("fmul", None, None), "arith.divf": ("fdiv", None, None),
    "arith.addi": (None, "add", "add"), "arith.subi": (None, "sub", "sub"),
    "arith.muli": (None, "mul", "mul"), "arith.divsi": (None, "sdiv", "sdiv"),
    "arith.divui": (None, "udiv", "udiv"), "arith.floordivsi": (None, "floordiv", "floordiv"),
    "arith.remsi": (None, "srem", "srem"), "arith.remui": (None, "urem", "urem"),
    "arith.maxsi": (None, "smax", "smax"), "arith.minsi": (None, "smin", "smin"),
    "arith.maxui": (None, "umax", "umax"), "arith.minui": (None, "umin", "umin"),
    "arith.andi": (None, "and_", "and_"), "arith.ori": (None, "or_", "or_"),
    "arith.xori": (None, "xor", "xor"), "arith.shli": (None, "shl", "shl"),
    "arith.shrsi": (None, "ashr", "ashr"), "arith.shrui": (None, "lshr", "lshr"),
}
#: unary ops lowered element-wise
UNARY = {"arith.negf", "math.absi"}

#: comparison predicates -> llvmlite's spelling
COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
#: tile_reduce kinds: identity (add, mul, bitwise) and (float op, int op)
REDUCE_IDENTITY = {"add": 0, "mul": 1, "or": 0, "xor": 0, "and": -1}
REDUCE_OP = {"add": ("arith.addf", "arith.addi"), "mul": ("arith.mulf", "arith.muli"),
              "max": ("arith.maxnumf", "arith.maxsi"), "min": ("arith.minnumf", "arith.minsi"),
              "and": (None, "arith.andi"), "or": (None, "arith.ori"), "xor": (None, "arith.xori")}
