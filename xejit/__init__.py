"""xejit: a Triton-like tile DSL embedded in Python that JIT-compiles to SPIR-V for Intel GPUs."""
from .runtime import _icd  # noqa: F401  (first: the CPU OpenCL runtime must be visible before dpctl loads)

from ._version import __version__  # noqa: E402,F401

from . import options as _options  # noqa: E402
from .codegen import spirv as _spirv  # noqa: E402

if not _options.current().interpret:
    # The SPIR-V emission worker (a Python process loading LLVM, 0.1-0.4 s) starts now, in the
    # background: the first compile would otherwise wait for it (codegen/spirv.py)
    _spirv.prestart_emitter()

from . import language  # noqa: E402
from .errors import CompilationError, OutOfBoundsError, XejitError, XejitTypeError, XejitValueError  # noqa: E402
from .jit import Kernel, kernel  # noqa: E402
from .language import cdiv, inline  # noqa: E402
from .autotuner import Autotuner, Config, autotune  # noqa: E402
from .matmul import MatmulError, matmul  # noqa: E402
from .attention import AttentionError, attention  # noqa: E402

import sys as _sys  # noqa: E402

if "torch" in _sys.modules:  # register torch.ops.xejit.matmul without importing torch ourselves
    from . import torch_ops  # noqa: E402,F401
