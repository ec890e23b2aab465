"""xejit's SSA IR: the dialect-agnostic core, the XeTile dialect, printer, verifier, interpreter.

Importing this package registers the XeTile ops and their numpy rules.
"""
from .core import (ArrayType, Block, BlockArgument, Builder, Function, Layout, Location, Module,
                   OP_DEFS, OpDef, OpResult, Operation, Region, ScalarType, SCALAR_TYPES, TileType,
                   Type, Value, VectorType, VerifyError, register_op, wg_map, bf16, f16, f32, i1,
                   i8, u8, i32, i64, index, round_to_bf16)
from . import xetile, xetile_semantics  # noqa: F401  (registers ops and rules)
from .interpreter import IMPLS, Buffer, Interpreter, InterpreterError, impl
from .printer import print_function, print_module
from .verifier import IRVerificationError, verify_function, verify_module

__all__ = [n for n in dir() if not n.startswith("_")]
from . import gpu, xegpu  # noqa: E402,F401  (register the subgroup and XeGPU dialects' ops)
