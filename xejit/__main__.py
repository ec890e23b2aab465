"""Command line: ``python -m xejit info`` lists devices, their targets, what their drivers accept
and Intel's GPU compiler; ``python -m xejit toolchain install`` installs that compiler."""
from __future__ import annotations

import argparse
import sys


def info(out=sys.stdout) -> int:
    from .codegen import probes
    from .codegen.errors import XejitError
    from .runtime import _icd, build_program, default_device, devices

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
    from .codegen.intel_compiler import find_toolchain, toolchain_dir
    from .codegen.targets import TARGETS

    tc = find_toolchain()
    gpus = ", ".join(f"{t.name} ({t.ocloc_device})" for t in TARGETS.values() if t.ocloc_device)
    if tc is None:
        print(f"Intel GPU compiler: not installed (python -m xejit toolchain install puts it in {toolchain_dir()})",
              file=out)
    else:
        print(f"Intel GPU compiler: {tc.describe()}", file=out)
        print(f"    builds for targets {gpus}", file=out)


def toolchain(args) -> int:
    from .codegen.errors import XejitError
    from .toolchain import install

    if args.action == "install":
        try:
            install(force=args.force)
        except XejitError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    toolchain_info()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m xejit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="devices, their compile targets, the features their drivers build, the toolchain")
    tp = sub.add_parser("toolchain", help="Intel's GPU compiler (ocloc): install it, or show which is used")
    tp.add_argument("action", choices=("install", "show"))
    tp.add_argument("--force", action="store_true", help="reinstall even when one is found")
    args = parser.parse_args(argv)
    if args.command == "info":
        status = info()
        toolchain_info()
        return status
    if args.command == "toolchain":
        return toolchain(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
