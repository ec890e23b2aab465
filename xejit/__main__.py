"""Command line: ``python -m xejit info`` lists devices, their targets, what their drivers accept
and Intel's GPU compiler; ``python -m xejit toolchain install`` installs that compiler;
``python -m xejit opt --passes layout,wg-to-sg file.mlir`` runs passes on IR text."""
from __future__ import annotations

import argparse
import sys

from .codegen import probes
from .codegen.intel_compiler import find_toolchain, toolchain_dir
from .codegen.passes.registry import PASSES, PassOptions, run_passes
from .codegen.targets import TARGETS
from .errors import XejitError
from .ir.parser import parse_module
from .ir.printer import print_function
from .runtime import _icd, build_program, default_device, devices
from .toolchain import install


def info(out=sys.stdout) -> int:

    found = devices()
    if not found:
        print(f"no SYCL devices found (CPU runtime expected at {_icd.CPU_RUNTIME})", file=out)
        return 1
    default = default_device()
    for d in found:
        mark = "*" if d.filter_string == default.filter_string else " "
        print(f"{mark} {d.filter_string:<22} {d.name}", file=out)
        print(f"    backend {d.backend}, type {d.kind}, target {d.target}", file=out)
        print(f"    sub-group sizes {d.sub_group_sizes}, compute units {d.sycl_device.max_compute_units}, "
              f"max work-group {d.sycl_device.max_work_group_size}, SLM {d.sycl_device.local_mem_size // 1024} KiB",
              file=out)
        sg = 16 if 16 in d.sub_group_sizes else max(d.sub_group_sizes)
        for feature, make in probes.PROBES.items():
            try:
                build_program(make(sg), d, keep_failed=False)
                verdict = "yes"
            except XejitError:
                verdict = "no (the driver does not build it)"
            print(f"    {feature:<20} {verdict}", file=out)
    print("* = default device (XEJIT_DEVICE overrides)", file=out)
    return 0


def toolchain_info(out=sys.stdout) -> None:

    tc = find_toolchain()
    gpus = ", ".join(f"{t.name} ({t.ocloc_device})" for t in TARGETS.values() if t.ocloc_device)
    if tc is None:
        print(f"Intel GPU compiler: not installed (python -m xejit toolchain install puts it in {toolchain_dir()})",
              file=out)
    else:
        print(f"Intel GPU compiler: {tc.describe()}", file=out)
        print(f"    builds for targets {gpus}", file=out)


def toolchain(args) -> int:

    if args.action == "install":
        try:
            install(force=args.force)
        except XejitError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    toolchain_info()
    return 0


def opt(args) -> int:
    """Parse IR text, run the named passes, print the result (``mlir-opt`` for xejit's IR)."""

    if args.list:
        for p in PASSES.values():
            print(f"{p.name:<18} {p.summary}")
        return 0
    if args.file in (None, "-"):
        text = sys.stdin.read()
    else:
        with open(args.file) as fh:
            text = fh.read()
    names = [n for n in (args.passes or "").split(",") if n]
    try:
        mod = parse_module(text)
        options = PassOptions(target=args.target, num_stages=args.num_stages)
        out = [print_function(run_passes(fn, names, options)) for fn in mod.functions]
    except XejitError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print("\n\n".join(out))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m xejit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="devices, their compile targets, the features their drivers build, the toolchain")
    tp = sub.add_parser("toolchain", help="Intel's GPU compiler (ocloc): install it, or show which is used")
    tp.add_argument("action", choices=("install", "show"))
    tp.add_argument("--force", action="store_true", help="reinstall even when one is found")
    op = sub.add_parser("opt", help="run compiler passes on IR text (for text tests, like mlir-opt)")
    op.add_argument("file", nargs="?", help="IR text (default: stdin)")
    op.add_argument("--passes", default="", help="comma-separated pass names, in order (see --list)")
    op.add_argument("--target", default="pvc", help="target of target-dependent passes (default pvc)")
    op.add_argument("--num-stages", type=int, default=3, help="pipelining depth (default 3)")
    op.add_argument("--list", action="store_true", help="list the passes and exit")
    args = parser.parse_args(argv)
    if args.command == "opt":
        return opt(args)
    if args.command == "info":
        status = info()
        toolchain_info()
        return status
    if args.command == "toolchain":
        return toolchain(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
