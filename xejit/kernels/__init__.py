"""Kernels written in the xejit DSL that the library itself uses (``gemm``: ``xejit.matmul``)."""
