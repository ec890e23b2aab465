"""Run one generated kernel in a child process and say how it ended, as one JSON line.

    python -m tests.hostile.runner KERNEL_FILE TARGET

The kernel file defines ``kernel`` (an ``@xejit.kernel``) and ``ARGS`` / ``KWARGS``; it is
compiled for TARGET and, on ``generic``, launched on a (1,) grid. Outcomes: ``ok``, ``error``
(an XejitError: what a user should get), ``raw`` (any other exception: a defect), ``internal``
(an XejitError that says "internal compiler error": a defect of ours).
"""
import importlib.util
import json
import resource
import sys


def main() -> None:
    path, target = sys.argv[1], sys.argv[2]
    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))     # no runaway compile
    import xejit
    out = {"outcome": "ok"}
    try:
        spec = importlib.util.spec_from_file_location("generated_kernel", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mod.kernel.compile(*mod.ARGS, target=target, **mod.KWARGS)
        if target == "generic":
            mod.kernel[(1,)](*mod.ARGS, **mod.KWARGS)
    except xejit.XejitError as e:
        text = str(e)
        out = {"outcome": "internal" if "internal compiler error" in text else "error",
               "type": type(e).__name__, "located": ".py:" in text, "message": text[:400]}
    except Exception as e:  # noqa: BLE001 -- the point is to see anything else
        out = {"outcome": "raw", "type": type(e).__name__, "message": str(e)[:400]}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
