"""Compiler passes, one module each; every pass is a function ``Function -> Function`` whose
docstring names its input and output IR level (see docs/compiler.md)."""
from .common import CompilerError, clone_function
from .layout_propagation import propagate_layouts, value_layout
from .wg_to_sg import distribute_to_subgroups
from .cleanup import cleanup, cse, dce, hoist_loop_invariants

__all__ = ["CompilerError", "clone_function", "propagate_layouts", "value_layout",
           "distribute_to_subgroups", "cleanup", "cse", "dce", "hoist_loop_invariants"]
