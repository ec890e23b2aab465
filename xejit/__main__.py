"""Command line: ``python -m xejit info`` lists devices, their targets and what their drivers accept."""
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m xejit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="devices, their compile targets, and the features their drivers build")
    args = parser.parse_args(argv)
    if args.command == "info":
        return info()
    return 2


if __name__ == "__main__":
    sys.exit(main())
