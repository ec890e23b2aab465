"""Run one generated kernel in a child process and say how it ended, as one JSON line.

    python -m tests.hostile.runner KERNEL_FILE TARGET

The kernel file defines ``kernel`` (an ``@xejit.kernel``) and ``ARGS`` / ``KWARGS``; it is
compiled for TARGET and launched on a (1,) grid -- on the CPU device for ``generic``, emulated
there (``XEJIT_EMULATE``) for a GPU target -- with its output arrays poisoned (NaN), and the
outputs are compared with the numpy interpreter's (``XEJIT_INTERPRET``) on the same inputs.
Outcomes: ``ok``, ``error`` (an XejitError: what a user should get), ``raw`` (any other
exception: a defect), ``internal`` (an XejitError that says "internal compiler error": a defect of
ours), ``wrong`` (the launch ran but its outputs differ from the interpreter's, or only one of the
two raised: a defect).
"""
import importlib.util
import json
import os
import re
import resource
import sys

import numpy as np

# Tolerances by the lowest precision the kernel computes in (rtol, atol)
_LOW = re.compile(r"float16|bfloat16")


def _outcome(e: BaseException) -> dict:
    import xejit
    text = str(e)
    if isinstance(e, xejit.XejitError):
        return {"outcome": "internal" if "internal compiler error" in text else "error",
                "type": type(e).__name__, "located": ".py:" in text, "message": text[:400]}
    return {"outcome": "raw", "type": type(e).__name__, "message": text[:400]}


def _poisoned(args: tuple) -> list:
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            a = a.copy()
            if a.dtype.kind == "f" and not a.any():   # an all-zero float array is an output: poison it
                a[...] = np.nan
        out.append(a)
    return out


def _compare(dev: list, ref: list, src: str) -> str | None:
    """None when the device's arrays equal the interpreter's within the kernel's tolerance."""
    rtol, atol = (2e-2, 1e-2) if _LOW.search(src) else (1e-5, 1e-6)
    for i, (d, r) in enumerate(zip(dev, ref)):
        if not isinstance(d, np.ndarray):
            continue
        d64, r64 = d.astype(np.float64), r.astype(np.float64)
        same = np.isclose(d64, r64, rtol=rtol, atol=atol, equal_nan=True) | (d64 == r64)
        if not same.all():
            k = np.flatnonzero(~same)
            return (f"argument {i}: {k.size} of {d.size} elements differ from the interpreter's, e.g. at "
                    f"{np.unravel_index(k[0], d.shape)}: {d.flat[k[0]]!r} vs {r.flat[k[0]]!r}")
    return None


def main() -> None:
    path, target = sys.argv[1], sys.argv[2]
    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))     # no runaway compile
    import xejit
    out = {"outcome": "ok"}
    try:
        spec = importlib.util.spec_from_file_location("generated_kernel", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        with open(path) as f:
            src = f.read()
        mod.kernel.compile(*mod.ARGS, target=target, **mod.KWARGS)
        if target != "generic":
            os.environ["XEJIT_EMULATE"] = target
        dev = _poisoned(mod.ARGS)
        mod.kernel[(1,)](*dev, **mod.KWARGS)
    except Exception as e:  # noqa: BLE001 -- the point is to see anything else
        out = _outcome(e)
    else:
        os.environ.pop("XEJIT_EMULATE", None)
        ref = _poisoned(mod.ARGS)
        try:
            xejit.kernel(mod.kernel.fn, interpret=True)[(1,)](*ref, **mod.KWARGS)
        except Exception as e:  # noqa: BLE001
            out = {"outcome": "wrong", "message": f"the launch ran but the interpreter raised: {_outcome(e)}"}
        else:
            diff = _compare(dev, ref, src)
            if diff is not None:
                out = {"outcome": "wrong", "message": diff}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
