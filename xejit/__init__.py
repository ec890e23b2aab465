"""xejit: a Triton-like tile DSL embedded in Python that JIT-compiles to SPIR-V for Intel GPUs."""
from .runtime import _icd  # noqa: F401  (first: the CPU OpenCL runtime must be visible before dpctl loads)

__version__ = "0.1.0"
