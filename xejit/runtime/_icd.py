"""Make the pip-installed Intel OpenCL CPU runtime visible to the OpenCL ICD loader.

The ``intel-opencl-rt`` wheel's ``.icd`` file names a placeholder path, so the loader finds no
CPU device unless ``OCL_ICD_FILENAMES`` names ``<sys.prefix>/lib/libintelocl.so``. This must
happen before dpctl (and with it the loader) is first imported; ``xejit/__init__`` imports this
module first. A user's own ``OCL_ICD_FILENAMES`` is kept and ours appended.

The runtime reads its ``CL_CONFIG_*`` variables once, when it loads: emulated GPU kernels are
built with ``-cl-opt-disable`` (``codegen/emulation.py``), which keeps their subgroups only with
``CL_CONFIG_CPU_O0_VECTORIZATION=True``, so it is set here unless the user set it. It changes no
optimised build (every non-emulated one).
"""
from __future__ import annotations

import os
import sys

CPU_RUNTIME = os.path.join(sys.prefix, "lib", "libintelocl.so")


def expose_cpu_runtime() -> None:
    if not os.path.exists(CPU_RUNTIME):
        return
    current = os.environ.get("OCL_ICD_FILENAMES", "")
    if CPU_RUNTIME not in current.split(":"):
        os.environ["OCL_ICD_FILENAMES"] = f"{current}:{CPU_RUNTIME}" if current else CPU_RUNTIME


def configure_cpu_runtime() -> bool:
    """Whether the CPU runtime builds ``-cl-opt-disable`` subgroup kernels widened: the variable
    is set and dpctl (which loads the runtime) was not imported before it was."""
    loaded = "dpctl" in sys.modules
    os.environ.setdefault("CL_CONFIG_CPU_O0_VECTORIZATION", "True")
    return not loaded and os.environ["CL_CONFIG_CPU_O0_VECTORIZATION"].lower() in ("true", "1")


expose_cpu_runtime()
#: False when dpctl came first or the user turned it off: emulated kernels then take the
#: optimising build (slower to build, never the crashing unwidened -O0 code).
UNOPTIMISED_SUBGROUPS = configure_cpu_runtime()
