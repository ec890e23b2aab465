"""xejit's benchmark: GEMM GFLOP/s against numpy and torch, compile latency, launch overhead,
autotuning time and first-call latency, on the current device, in one run.

Run from the repository root:

    python benchmarks/run.py            # full run (square 256..2048, LLM-like shapes scaled down)
    python benchmarks/run.py --quick    # about a minute
    python -m benchmarks.run --quick    # the same

Writes ``benchmarks/results/<device>-<date>.json`` (and ``latest.json``) and a PNG plot beside it,
and prints a table. Every figure is a median of repeated runs after warm-up, measured in the same
run as its references (numpy/OpenBLAS and torch on this CPU); a GEMM figure is the median of
several timed series (rounds) that alternate with its references' series, whose own figures are
taken the same way (``--rounds``; skinny shapes, M <= 8, twice as many: a series of theirs lasts
tens of milliseconds, and this VM's memory bandwidth moves by a third from one to the next).
The machine and its load are recorded. When DSL kernels cannot run on the device yet, the xejit columns say why instead of
showing numbers (``--interpret`` runs them in the numpy interpreter, only to check the script).
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"

# (name, M, N, K): square, and LLM-like shapes scaled to what the CPU device runs in minutes.
FULL_SHAPES = [
    ("square-256", 256, 256, 256),
    ("square-512", 512, 512, 512),
    ("square-1024", 1024, 1024, 1024),
    ("square-2048", 2048, 2048, 2048),
    ("decode 1x4096x4096 -> 1x2048x2048", 1, 2048, 2048),
    ("decode x @ w.T 1x2048x2048", 1, 2048, 2048),
    ("small-batch 8x2048x2048", 8, 2048, 2048),
    ("small-batch x @ w.T 8x2048x2048", 8, 2048, 2048),
    ("prefill 8192x1024x4096 -> 2048x256x1024", 2048, 256, 1024),
    ("mlp-up 512x2048x512", 512, 2048, 512),
]
QUICK_SHAPES = [
    ("square-256", 256, 256, 256),
    ("square-512", 512, 512, 512),
    ("decode 1x1024x1024", 1, 1024, 1024),
    ("prefill 1024x256x512", 1024, 256, 512),
]


# --- helpers ----------------------------------------------------------------------------------

#: the most timed calls of :func:`median_time`
_MAX_REPS = 200


def median_time(fn: Callable[[], Any], *, warmup: int, budget_s: float, min_reps: int = 3,
                max_reps: int = _MAX_REPS) -> float:
    """Median seconds per call of ``fn`` after ``warmup`` calls, over a time budget. Sleeps
    briefly first so that another library's spinning worker threads (OpenMP) have parked."""
    time.sleep(0.3)
    for _ in range(warmup):
        t0 = time.perf_counter()
        fn()
        if time.perf_counter() - t0 > budget_s:   # a slow call: one warm-up is enough
            break
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    n = max(min_reps, min(max_reps, int(budget_s / max(first, 1e-6))))
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def unavailable(e: BaseException | str) -> dict:
    msg = e if isinstance(e, str) else f"{type(e).__name__}: {e}"
    return {"unavailable": msg.splitlines()[0][:300]}


def device_path_status() -> str | None:
    """None when DSL kernels run on the device, else why not."""
    import xejit
    import xejit.language as xl

    @xejit.kernel(interpret=False)
    def probe(x, y, BN: xl.constexpr):
        t = xl.load_tile(xl.init_tile(x, [0, 0], [1, BN]))
        xl.store_tile(xl.init_tile(y, [0, 0], [1, BN]), t + 1.0)

    try:
        x = np.arange(16, dtype=np.float32)
        y = np.zeros_like(x)
        probe[(1,)](x, y, BN=16)
        return None if np.array_equal(y, x + 1) else "wrong results from the device path"
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}".splitlines()[0]


def machine() -> dict:
    import xejit
    from xejit.runtime import default_device
    d = default_device()
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import torch
    import dpctl
    return {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "cpu": cpu, "cores": os.cpu_count(),
            "loadavg_start": os.getloadavg(), "python": platform.python_version(),
            "device": d.name, "device_filter": d.filter_string, "target": d.target,
            "driver": str(d.sycl_device.driver_version), "xejit": xejit.__version__,
            "numpy": np.__version__, "torch": torch.__version__, "dpctl": dpctl.__version__,
            "torch_threads": torch.get_num_threads()}


# --- GEMM throughput --------------------------------------------------------------------------

#: timed series of each library per shape, alternating with the other libraries' (the figure is
#: the median of the series' medians)
ROUNDS = 5


def gemm_inputs(M: int, N: int, K: int, colb: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """float64 operands of one shape, the same in the reference process and in this one;
    ``colb``: b column-major, the transposed view of an [N, K] array (``x @ w.T`` with a torch
    ``Linear`` weight; the rows whose name says ``w.T``)."""
    rng = np.random.default_rng([M, N, K])
    a = rng.standard_normal((M, K)) + 0.1
    return a, (rng.standard_normal((N, K)) + 0.1).T if colb else rng.standard_normal((K, N)) + 0.1


def reference_server() -> None:
    """The reference process: for each request line (JSON: library, shape, dtype, budget) one
    timed series of numpy's or torch's matmul, its median seconds per call written back as a line.
    It never loads the OpenCL runtime, whose worker threads keep the cores busy after a kernel
    ran (numpy 512^3 fp32 fell from 174 to 11 GFLOP/s in the same process after one xejit
    launch on this machine)."""
    import torch
    operands: dict[tuple, tuple] = {}
    for line in sys.stdin:
        lib, M, N, K, dtype, budget, colb = json.loads(line)
        key = (lib, M, N, K, dtype, colb)
        if key not in operands:
            a64, b64 = gemm_inputs(M, N, K, colb)   # (astype and .to keep a column-major b's layout)
            if lib == "numpy":
                operands[key] = (a64.astype(np.float32), b64.astype(np.float32))
            else:
                tdt = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
                operands[key] = (torch.from_numpy(a64).to(tdt), torch.from_numpy(b64).to(tdt))
        fn = (lambda x, y: x @ y) if lib == "numpy" else torch.matmul
        print(json.dumps(median_time(functools.partial(fn, *operands[key]), warmup=3, budget_s=budget)), flush=True)


class ReferenceProcess:
    """numpy and torch timed in a child process (:func:`reference_server`), one series per
    request, while this process waits: their series and xejit's alternate round by round, so that
    the machine's drift over the run (other processes, the VM's neighbours) weighs on each alike,
    and one series drawn in a bad moment moves no figure (the median of the rounds')."""

    def __init__(self):
        self._err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--reference-server"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, text=True)

    def series(self, lib: str, M: int, N: int, K: int, dtype: str, budget_s: float, colb: bool = False) -> float:
        """Median seconds per call of one timed series of ``lib`` ("numpy" or "torch")."""
        self.proc.stdin.write(json.dumps([lib, M, N, K, dtype, budget_s, colb]) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self._err.seek(0)
            raise RuntimeError(f"reference measurement failed: {self._err.read().strip()[-500:]}")
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self._err.close()


def gemm_rows(shapes, dtypes, budget_s: float, use_xejit: bool, rounds: int = ROUNDS) -> list[dict]:
    """GFLOP/s of numpy, torch and xejit per shape and dtype: xejit's first call (autotuning with
    an empty cache, compile), then ``rounds`` rounds of one timed series of each (the references
    in :class:`ReferenceProcess`), the libraries in a rotated order each round; each figure is the
    median of its series' medians (the series are in the row: ``series_s``); rows of M <= 8 take
    twice the rounds."""
    refs = ReferenceProcess()
    rows = []
    try:
        for name, M, N, K in shapes:
            for dtype in dtypes:
                rows.append(gemm_row(refs, name, M, N, K, dtype, budget_s, use_xejit, rounds))
                print(_fmt_row(rows[-1]), flush=True)
    finally:
        refs.close()
    return rows


#: the skinny rows' other ways of calling xejit.matmul (series name, label), beside USM operands
CALL_VARIANTS = [("xejit_numpy_operands", "numpy operands (by address)"),
                 ("xejit_numpy_out", "numpy operands, out="),
                 ("xejit_torch_operands", "torch CPU tensors"),
                 ("xejit_numpy_fresh_a", "numpy operands, new a each call")]


def gemm_row(refs: ReferenceProcess, name: str, M: int, N: int, K: int, dtype: str, budget_s: float,
             use_xejit: bool, rounds: int) -> dict:
    """One row of :func:`gemm_rows`."""
    import torch

    import xejit
    from xejit.matmul import gemm_tuner
    from xejit.runtime import usm
    colb = "w.T" in name
    a64, b64 = gemm_inputs(M, N, K, colb)
    flop = 2.0 * M * N * K
    row: dict[str, Any] = {"shape": name, "M": M, "N": N, "K": K, "dtype": dtype}
    series: dict[str, Callable[[], float]] = {
        "torch": lambda: refs.series("torch", M, N, K, dtype, budget_s, colb)}
    if dtype == "float32":
        series["numpy"] = lambda: refs.series("numpy", M, N, K, dtype, budget_s, colb)
    else:
        row["numpy_gflops"] = None  # numpy has no bfloat16
    rec = None
    if not use_xejit:
        row["xejit"] = unavailable(XEJIT_REASON)
    else:
        try:
            if dtype == "float32":   # USM shared memory: no copies on the way in
                xa, xb = usm.asarray(a64.astype(np.float32)), usm.asarray(b64.astype(np.float32))
                short = "f32"
            else:                    # torch CPU tensors go through USM staging copies
                xa, xb = (torch.from_numpy(x).to(torch.bfloat16) for x in (a64, b64))
                short = "bf16"
            t0 = time.perf_counter()
            c = xejit.matmul(xa, xb)           # tunes (empty cache) and compiles
            row["xejit_first_call_s"] = time.perf_counter() - t0
            tuner = gemm_tuner()
            rec = next((r for r in tuner.records.values()
                        if r.key[:3] == (M, N, K) and ("a", short, (1, 0)) in r.key), None)
            got = c.double().numpy() if isinstance(c, torch.Tensor) else np.asarray(c, np.float64)
            ref = a64 @ b64 if dtype == "float32" else (xa.double().numpy() @ xb.double().numpy())
            row["xejit_rel_err"] = float(np.abs(got - ref).max() / np.abs(ref).max())
            series["xejit"] = lambda: median_time(lambda: xejit.matmul(xa, xb), warmup=1, budget_s=budget_s)
            if dtype == "float32" and M <= 8:
                # skinny shapes as a user calls them: plain numpy arrays, passed by address on a
                # device that reads host memory (docs/autotune-and-matmul.md, "Plain numpy operands")
                na, nb = np.asarray(xa).copy(order="K"), np.asarray(xb).copy(order="K")   # (layouts kept)
                series["xejit_numpy_operands"] = lambda: median_time(lambda: xejit.matmul(na, nb), warmup=1,
                                                                     budget_s=budget_s)
                ta, tb = torch.from_numpy(na.copy()), torch.from_numpy(nb.copy(order="K"))   # torch CPU tensors
                series["xejit_torch_operands"] = lambda: median_time(lambda: xejit.matmul(ta, tb), warmup=1,
                                                                     budget_s=budget_s)
                nc = np.empty((M, N), np.float32)   # a decode loop's result buffer, written in place
                series["xejit_numpy_out"] = lambda: median_time(lambda: xejit.matmul(na, nb, out=nc), warmup=1,
                                                                budget_s=budget_s)

                def fresh_a() -> float:
                    # decode as it runs: a new activation array every call (made before the timed
                    # calls: the figure is the call alone), the same weights
                    fresh = iter([na.copy() for _ in range(_MAX_REPS + 3)])
                    return median_time(lambda: xejit.matmul(next(fresh), nb), warmup=1, budget_s=budget_s)
                series["xejit_numpy_fresh_a"] = fresh_a
        except Exception as e:  # noqa: BLE001  (a benchmark reports, it does not stop)
            row["xejit"] = unavailable(e)
    times: dict[str, list[float]] = {k: [] for k in series}
    order = list(series)
    if M <= 8:
        rounds *= 2
    for r in range(rounds):
        for k in order[r % len(order):] + order[:r % len(order)]:
            try:
                times[k].append(series[k]())
            except Exception as e:  # noqa: BLE001  (an xejit failure is reported in its row)
                if not k.startswith("xejit"):
                    raise
                row["xejit"] = unavailable(e)
                times = {n: v for n, v in times.items() if not n.startswith("xejit")}
                order = [n for n in order if not n.startswith("xejit")]
                break
    for k, v in times.items():
        if v:
            row[f"{k}_gflops"] = flop / statistics.median(v) / 1e9
    row["series_s"] = times
    if rec is not None and "xejit" not in row:
        row["autotune_s"] = rec.tuning_time_s
        row["autotune_from_disk"] = rec.from_disk
        row["config"] = repr(rec.best)
        row["configs_timed"] = len(rec.timings)
        row["configs_failed"] = [f"{c}: {r}" for c, r in rec.failed]
        row["configs_pruned"] = len(rec.pruned)
    return row


def _fmt_row(r: dict) -> str:
    def g(k):
        v = r.get(k)
        return f"{v:8.1f}" if isinstance(v, (int, float)) else f"{'-':>8}"
    x = g("xejit_gflops") if "xejit_gflops" in r else f"{'n/a':>8}"
    tune = f"{r['autotune_s']:.2f}s" if "autotune_s" in r else "-"
    ref = r.get("numpy_gflops") or r.get("torch_gflops")
    ratio = f"{r['xejit_gflops'] / ref:6.2f}x" if r.get("xejit_gflops") and ref else f"{'-':>7}"
    extra = ", ".join(f"{label} {r[f'{key}_gflops']:.1f}" for key, label in CALL_VARIANTS if f"{key}_gflops" in r)
    extra = f"   {extra}" if extra else ""
    return (f"{r['shape']:<42} {r['dtype']:<9} {g('numpy_gflops')} {g('torch_gflops')} {x} {ratio}"
            f"   tune {tune}{extra}")


# --- compile latency --------------------------------------------------------------------------

_COMPILE_PROBE = r"""
import json, sys, time
sys.path.insert(0, {root!r})
t0 = time.perf_counter()
import numpy as np, xejit
from xejit.kernels.gemm import gemm_kernel
from xejit.codegen.compiler import compile_kernel
from xejit.runtime import build_program, default_device
dev = default_device()
t_import = time.perf_counter() - t0
a = np.zeros((512, 512), np.float32)
out = {{"import_and_device_s": t_import}}
for label, (bm, bn, bk, sg) in (("cold", {cold}), ("warm", {warm})):
    t = time.perf_counter()
    mod = gemm_kernel.compile_ir(a, a, a, a, 512, 512, 512, BM=bm, BN=bn, BK=bk, num_subgroups=sg)
    stages = {{"frontend": time.perf_counter() - t}}
    ck = compile_kernel(mod, dev.target)
    stages.update(ck.timings)
    t = time.perf_counter()
    build_program(ck.spv, dev, validate=False, cache=False)   # the driver compiles (no cached binary)
    stages["driver_build"] = time.perf_counter() - t
    stages["total"] = sum(v for k, v in stages.items())
    out[label] = stages
print(json.dumps(out))
"""


def compile_latency(repeats: int, cold: tuple, warm: tuple) -> dict:
    """Per-stage compile times of the GEMM kernel: the first compile in a fresh process (cold,
    config ``cold`` = (BM, BN, BK, num_subgroups)) and a second specialization in the same
    process (warm, config ``warm``); medians over ``repeats`` fresh processes."""
    runs = []
    for _ in range(repeats):
        code = _COMPILE_PROBE.format(root=str(ROOT), cold=tuple(cold), warm=tuple(warm))
        p = subprocess.run([sys.executable, "-c", code],
                           capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            return unavailable(p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed")
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    out: dict[str, Any] = {"repeats": repeats, "configs": {"cold": cold, "warm": warm},
                           "import_and_device_s": statistics.median(r["import_and_device_s"] for r in runs)}
    for label in ("cold", "warm"):
        keys = runs[0][label].keys()
        out[label] = {k: statistics.median(r[label][k] for r in runs) for k in keys}
    return out


# --- launch overhead --------------------------------------------------------------------------

def launch_overhead(n: int) -> dict:
    """Median of ``n`` launches of a small DSL kernel through ``kernel[grid](...)`` against a bare
    dpctl ``queue.submit(...).wait()`` of the same SPIR-V kernel with pre-marshalled arguments."""
    import xejit
    import xejit.language as xl
    from xejit.runtime import default_device, usm
    from xejit.runtime.launch import _marshal

    @xejit.kernel(interpret=False)
    def add1(x, y, BN: xl.constexpr):
        off = xl.program_id(0) * BN
        t = xl.load_tile(xl.init_tile(x, [0, off], [1, BN]))
        xl.store_tile(xl.init_tile(y, [0, off], [1, BN]), t + 1.0)

    size, bn = 4096, 256
    x = usm.asarray(np.ones(size, np.float32))
    y = usm.empty(size, np.float32)
    grid = (size // bn,)

    def timed(*fns):
        """Medians (us) of ``n`` calls of each of ``fns``, interleaved call by call, so that the
        machine's drift over the run (other processes, clock) weighs on each alike: run one after
        the other, the same two launches differed by 0.3-10 us from run to run."""
        for _ in range(50):
            for fn in fns:
                fn()
        ts = [[] for _ in fns]
        for _ in range(n):
            for fn, out in zip(fns, ts):
                t = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t)
        return [statistics.median(out) * 1e6 for out in ts]

    from xejit import device_launch
    dev = default_device()
    params, _, options, key = add1.bind([x, y], {"BN": bn, "num_subgroups": 1})
    rk, _, plan, wg = device_launch.compiled(add1, add1._module(params, options, key), options)
    q = dev.queue
    raw = _marshal(rk, device_launch.expand_args(plan, [x, y])).args   # marshalled once, outside the loop
    local = [wg[0]]
    glob = [grid[0] * wg[0]]
    k = rk
    # kernel[grid] returns when the kernel has finished (every xejit launch waits), as submit().wait() does
    bare, xej = timed(lambda: q.submit(k.sycl_kernel, raw, glob, local).wait(),
                      lambda: add1[grid](x, y, BN=bn, num_subgroups=1))
    out = {"launches": n, "bare_dpctl_us": bare, "xejit_us": xej, "overhead_us": xej - bare}
    out.update(matmul_overhead(timed))
    return out


def matmul_overhead(timed: Callable) -> dict:
    """``xejit.matmul`` on a cached 64^3 fp32 shape (USM operands, a new result each call) against
    ``kernel[grid](...)`` of the GEMM kernel with the config it chose, into a preallocated result."""
    import xejit
    import xejit.language as xl
    from xejit.matmul import gemm_tuner
    from xejit.runtime import usm
    m = 64
    rng = np.random.default_rng(1)
    a, b = (usm.asarray(rng.standard_normal((m, m)).astype(np.float32)) for _ in range(2))
    c = usm.empty((m, m), np.float32)
    xejit.matmul(a, b)
    tuner = gemm_tuner()
    meta = tuner.best_config.all_kwargs()
    grid = (xejit.cdiv(m, meta["BM"]), xejit.cdiv(m, meta["BN"]))
    direct, mm = timed(lambda: tuner.kernel[grid](a, b, c, c, m, m, m, ACC=xl.float32, HAS_BIAS=False, ACT=None, **meta),
                       lambda: xejit.matmul(a, b))
    return {"matmul_64_us": mm, "gemm_kernel_launch_64_us": direct}


# --- first-call latency -----------------------------------------------------------------------

_FIRST_CALL = r"""
import json, sys, time
sys.path.insert(0, {root!r})
t0 = time.perf_counter()
import numpy as np, xejit
t1 = time.perf_counter()
a = np.ones((512, 512), np.float32)
xejit.matmul(a, a)
t2 = time.perf_counter()
xejit.matmul(a, a)
t3 = time.perf_counter()
print(json.dumps({{"import_s": t1 - t0, "first_call_s": t2 - t1, "second_call_s": t3 - t2}}))
"""


def first_call_latency(interpret: bool) -> dict:
    """``xejit.matmul`` 512^3 fp32 in fresh processes: with an empty cache directory (cold: compile
    and tune) and again with the cache it left (warm: choices and binaries from disk)."""
    env = dict(os.environ)
    if interpret:
        env["XEJIT_INTERPRET"] = "1"
    with tempfile.TemporaryDirectory() as cache:
        env["XEJIT_CACHE_DIR"] = cache
        out = {}
        for label in ("cold", "warm"):
            p = subprocess.run([sys.executable, "-c", _FIRST_CALL.format(root=str(ROOT))], env=env,
                               capture_output=True, text=True, timeout=900)
            if p.returncode != 0:
                return unavailable(p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed")
            out[label] = json.loads(p.stdout.strip().splitlines()[-1])
    return out


# --- plot -------------------------------------------------------------------------------------

def goal_rows(results: dict) -> list[tuple[str, float, float, str, bool]]:
    """The figures issue goals are stated for, each as (label, xejit / reference, goal ratio,
    absolute values, higher is better): GEMM against numpy (goal 1.0), GEMV on numpy operands, launch against a bare
    dpctl submit (1.5), matmul 64^3 against its kernel launch (2), compile to SPIR-V against 150 ms,
    first call against 1 s cold and 0.2 s warm. Missing figures are left out."""
    out = []
    for r in results.get("gemm", []):
        ref = r.get("numpy_gflops")
        for key, how in [("xejit_gflops", "")] + [(f"{k}_gflops", f", {label}") for k, label in CALL_VARIANTS
                                                  if k != "xejit_torch_operands"]:
            if r.get(key) and ref:
                out.append((f"{r['shape'].split(' ->')[0]} {r['dtype']}{how}", r[key] / ref,
                            1.0, f"{r[key]:.0f} vs {ref:.0f} GFLOP/s", True))
    lo = results.get("launch_overhead", {})
    if "xejit_us" in lo:
        out.append(("kernel[grid] / bare dpctl", lo["xejit_us"] / lo["bare_dpctl_us"], 1.5,
                    f"{lo['xejit_us']:.1f} vs {lo['bare_dpctl_us']:.1f} us", False))
        out.append(("matmul 64^3 / its kernel launch", lo["matmul_64_us"] / lo["gemm_kernel_launch_64_us"], 2.0,
                    f"{lo['matmul_64_us']:.1f} vs {lo['gemm_kernel_launch_64_us']:.1f} us", False))
    cold = results.get("compile_latency", {}).get("cold")
    if cold:
        spirv = cold["total"] - cold.get("driver_build", 0.0)
        out.append(("compile to SPIR-V, cold / 150 ms", spirv / 0.150, 1.0, f"{spirv * 1e3:.0f} ms", False))
    fc = results.get("first_call", {})
    for label, goal in (("cold", 1.0), ("warm", 0.2)):
        if label in fc:
            t = fc[label]["first_call_s"]
            out.append((f"first matmul 512^3, {label} cache / {goal:g} s", t / goal, 1.0, f"{t:.2f} s", False))
    return out


def plot(results: dict, path: Path, title: str) -> str | None:
    """GFLOP/s per dtype against numpy and torch, and a last panel with every goal figure as a
    ratio to its reference (GEMM: xejit / numpy, higher is better; the others: lower is better)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install 'xejit[bench]')"
    rows = results.get("gemm", [])
    dtypes = sorted({r["dtype"] for r in rows}, reverse=True)
    goals = goal_rows(results)
    n = len(dtypes) + (1 if goals else 0)
    heights = [3.6] * len(dtypes) + ([0.32 * len(goals) + 1.2] if goals else [])
    fig, axes = plt.subplots(n, 1, figsize=(11, sum(heights)), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    for ax, dt in zip(axes[:, 0], dtypes):
        rs = [r for r in rows if r["dtype"] == dt]
        xs = np.arange(len(rs))
        series = [("numpy", "numpy_gflops"), ("torch", "torch_gflops"), ("xejit", "xejit_gflops")] + \
            [(f"xejit, {label}", f"{key}_gflops") for key, label in CALL_VARIANTS]
        series = [s for s in series if any(r.get(s[1]) for r in rs)]
        w = 0.8 / len(series)
        for i, (label, key) in enumerate(series):
            vals = [r.get(key) or 0.0 for r in rs]
            ax.bar(xs + (i - (len(series) - 1) / 2) * w, vals, w, label=label)
        ax.set_xticks(xs, [r["shape"].split(" ->")[0] for r in rs], rotation=20, ha="right", fontsize=8)
        ax.set_ylabel("GFLOP/s")
        ax.set_title(f"{dt}")
        ax.legend(fontsize=8)
        if not any(r.get("xejit_gflops") for r in rs):
            ax.text(0.5, 0.9, "xejit: " + str(rs[0].get("xejit", {}).get("unavailable", "n/a"))[:90],
                    transform=ax.transAxes, ha="center", fontsize=7, color="gray")
    if goals:
        ax = axes[-1, 0]
        ys = np.arange(len(goals))[::-1]
        ratios = [g[1] for g in goals]
        met = [(g[1] >= g[2]) if g[4] else (g[1] <= g[2]) for g in goals]
        ax.barh(ys, ratios, color=["tab:green" if m else "tab:red" for m in met])
        for y, g in zip(ys, goals):
            ax.plot([g[2], g[2]], [y - 0.4, y + 0.4], color="black", lw=1.5)
            ax.text(max(g[1], g[2]) * 1.02, y, f"{g[1]:.2f}x  ({g[3]})", va="center", fontsize=7)
        ax.set_yticks(ys, [g[0] for g in goals], fontsize=7)
        ax.set_xlim(0, max(max(ratios), max(g[2] for g in goals)) * 1.45)
        ax.set_xlabel("xejit / reference (GEMM: higher is better; others: lower); black mark: the goal")
        ax.set_title("goals: green met, red not")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


# --- main -------------------------------------------------------------------------------------

XEJIT_REASON = ""


def main(argv: list[str] | None = None) -> dict:
    global XEJIT_REASON
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small shapes and short budgets (about a minute)")
    p.add_argument("--interpret", action="store_true",
                   help="run xejit kernels in the numpy interpreter (checks the script; numbers are meaningless)")
    p.add_argument("--launches", type=int, default=1000)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--rounds", type=int, default=None,
                   help=f"timed series of each library per shape, alternating (default {ROUNDS}, --quick 3)")
    p.add_argument("--only", metavar="TEXT[,TEXT...]", help="only the GEMM shapes whose name contains one of these")
    p.add_argument("--reference-server", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--keep-cache", action="store_true",
                   help="use XEJIT_CACHE_DIR as it is (default: an empty one, so tuning is measured)")
    args = p.parse_args(argv)
    if args.reference_server:   # the child process of ReferenceProcess: no xejit, no OpenCL runtime
        reference_server()
        return {}
    if not args.keep_cache:
        os.environ["XEJIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="xejit-bench-cache-")

    t_start = time.perf_counter()
    if args.interpret:
        os.environ["XEJIT_INTERPRET"] = "1"
    status = device_path_status()
    use_xejit = status is None or args.interpret
    XEJIT_REASON = f"DSL kernels do not run on the device yet ({status})" if status else ""
    shapes = QUICK_SHAPES if args.quick else FULL_SHAPES
    if args.only:
        shapes = [s for s in shapes if any(t in s[0] for t in args.only.split(","))]
    if args.interpret:
        shapes = [s for s in shapes if s[1] * s[2] * s[3] <= 512 ** 3][:2]
    dtypes = ["float32"] if args.quick else ["float32", "bfloat16"]
    budget = 0.2 if args.quick else 0.5
    rounds = args.rounds or (3 if args.quick else ROUNDS)

    info = machine()
    info["backend"] = "interpreter" if args.interpret else ("device" if status is None else "none")
    if status:
        info["device_path"] = status
    print(f"xejit benchmark on {info['device']} (target {info['target']}), {info['cores']} cores, "
          f"load {info['loadavg_start']}; xejit kernels: {info['backend']}"
          + (f" -- {status}" if status and not args.interpret else ""), flush=True)
    print(f"{'shape':<42} {'dtype':<9} {'numpy':>8} {'torch':>8} {'xejit':>8} {'/ref':>7}   (GFLOP/s; xejit on "
          f"USM operands, ref = numpy, else torch)", flush=True)
    results: dict[str, Any] = {"machine": info, "quick": args.quick}
    results["gemm"] = gemm_rows(shapes, dtypes, budget, use_xejit, rounds)
    results["rounds"] = rounds

    # two configs of the generic space (the CPU driver's build time grows fast with the tile)
    results["compile_latency"] = compile_latency(1 if args.quick else 3, (8, 32, 8, 2), (4, 32, 16, 1))
    cl = results["compile_latency"]
    if "cold" in cl:
        for label in ("cold", "warm"):
            print(f"compile {label}: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in cl[label].items()))
    else:
        print(f"compile latency: {cl['unavailable']}")

    if use_xejit and not args.interpret:
        try:
            results["launch_overhead"] = launch_overhead(args.launches)
        except Exception as e:  # noqa: BLE001
            results["launch_overhead"] = unavailable(e)
    else:
        results["launch_overhead"] = unavailable(XEJIT_REASON or "not measured under the interpreter")
    lo = results["launch_overhead"]
    print("launch: " + (f"bare dpctl {lo['bare_dpctl_us']:.1f} us, xejit {lo['xejit_us']:.1f} us "
                        f"(+{lo['overhead_us']:.1f} us, {lo['xejit_us'] / lo['bare_dpctl_us']:.2f}x), "
                        f"median of {lo['launches']}; xejit.matmul 64^3 {lo['matmul_64_us']:.1f} us, "
                        f"its GEMM kernel[grid] {lo['gemm_kernel_launch_64_us']:.1f} us "
                        f"({lo['matmul_64_us'] / lo['gemm_kernel_launch_64_us']:.2f}x)"
                        if "xejit_us" in lo else lo["unavailable"]))

    if use_xejit:
        results["first_call"] = first_call_latency(args.interpret)
    else:
        results["first_call"] = unavailable(XEJIT_REASON)
    fc = results["first_call"]
    print("first xejit.matmul 512^3 fp32 (fresh process): " + (
        f"cold {fc['cold']['first_call_s'] * 1e3:.0f} ms, warm {fc['warm']['first_call_s'] * 1e3:.0f} ms, "
        f"later calls {fc['warm']['second_call_s'] * 1e3:.1f} ms" if "cold" in fc else fc["unavailable"]))
    results["autotune_s_per_shape"] = {f"{r['shape']} {r['dtype']}": r.get("autotune_s")
                                       for r in results["gemm"] if "autotune_s" in r}
    info["loadavg_end"] = os.getloadavg()
    results["wall_s"] = time.perf_counter() - t_start

    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"{info['target']}-{time.strftime('%Y%m%d-%H%M%S')}" + ("-quick" if args.quick else "")
    text = json.dumps(results, indent=1, default=str)
    for name in (f"{stem}.json", "latest.json"):
        tmp = args.out / f".{name}.tmp"
        tmp.write_text(text)
        os.replace(tmp, args.out / name)
    problem = plot(results, args.out / f"{stem}.png",
                   f"{info['device']} ({info['target']}), {info['cores']} cores, {info['date']}, "
                   f"xejit: {info['backend']}")
    print(f"wrote {args.out / (stem + '.json')}" + (f" (no plot: {problem})" if problem else
                                                    f" and {stem}.png") + f" in {results['wall_s']:.0f} s")
    return results


if __name__ == "__main__":
    main()
