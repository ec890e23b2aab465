"""Make the pip-installed Intel OpenCL CPU runtime visible to the OpenCL ICD loader.

The ``intel-opencl-rt`` wheel's ``.icd`` file names a placeholder path, so the loader finds no
CPU device unless ``OCL_ICD_FILENAMES`` names ``<sys.prefix>/lib/libintelocl.so``. This must
happen before dpctl (and with it the loader) is first imported; ``xejit/__init__`` imports this
module first. A user's own ``OCL_ICD_FILENAMES`` is kept and ours appended.
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


expose_cpu_runtime()
