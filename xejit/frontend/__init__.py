"""Python AST -> XeTile IR."""
from .codegen import CodeGenerator, Param, build_module

__all__ = ["CodeGenerator", "Param", "build_module"]
