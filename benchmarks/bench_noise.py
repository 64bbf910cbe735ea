#!/usr/bin/env python3
"""The default study twice -- quiet, then with a CPU hog on every core -- and whether the
second contradicts the first.

Runs ``snakemake --cores 1 all`` into ``<results>/quiet`` and then into ``<results>/hog``
while one busy-loop process per core runs (bounded: killed when the study ends, or after
``--hog-s`` seconds). Prints markdown tables from the two studies' ``runs`` tables:

1. per run: status, median iteration ms [95% CI], other processes' CPU share, in each study,
   and whether the two agree: a run measured under the hog must be ``unstable`` or have an
   interval overlapping the quiet one's;
2. per model and OpenCL run: the OpenCL-vs-CPU-backend comparison of each study (the
   study's GPU-vs-CPU question; on a host without a GPU the OpenCL device is PoCL), on the
   intervals (``OpenCL faster`` / ``CPU faster`` only when the intervals do not overlap, else
   ``no difference``; a comparison with a run that is not ``ok`` is ``excluded``), and
   whether the hog study contradicts the quiet one (opposite decided verdicts).

Exits 1 when a verdict contradicts, or a run measured under the hog is ``ok`` yet outside
the quiet run's interval. Extra Hydra overrides after ``--`` go to both studies::

    python benchmarks/bench_noise.py
    python benchmarks/bench_noise.py --results results/noise -- 'sweep.kernels=[baseline]'
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from phonetrain.layout import Layout  # noqa: E402
from phonetrain.results.schema import read_table  # noqa: E402

HOG = "import time\nend = time.time() + {s}\nwhile time.time() < end:\n    pass\n"


def study(results: str, extra: list[str], cores: int) -> tuple[float, int]:
    """One ``snakemake all`` of the default study into ``results``; (seconds, exit status)."""
    snakemake = Path(sys.executable).with_name("snakemake")
    overrides = [f"results_dir={results}", *extra]
    cmd = [str(snakemake), "--cores", str(cores), "all", "--keep-going",
           "--config", f"overrides={json.dumps(overrides)}"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode:
        print(p.stderr[-3000:], file=sys.stderr)
    return time.monotonic() - t0, p.returncode


def hogs(seconds: float) -> list[subprocess.Popen]:
    """One busy loop per core, each ending by itself after ``seconds``."""
    return [subprocess.Popen([sys.executable, "-c", HOG.format(s=seconds)])
            for _ in range(os.cpu_count() or 1)]


def runs(results: str):
    return read_table(Layout(results).summary("runs"), "runs").set_index("run_id")


def _ci(r) -> str:
    if r is None or r["iteration_median_ms"] != r["iteration_median_ms"]:
        return "-"
    return (f"{r['iteration_median_ms']:.3f} [{r['iteration_ci_low_ms']:.3f}, "
            f"{r['iteration_ci_high_ms']:.3f}]")


def _share(r) -> str:
    v = None if r is None else r["other_cpu_share"]
    return "-" if v is None or v != v else f"{100 * v:.0f}%"


def overlap(a, b) -> bool:
    return not (a["iteration_ci_high_ms"] < b["iteration_ci_low_ms"] or
                b["iteration_ci_high_ms"] < a["iteration_ci_low_ms"])


def agree(q, h) -> str:
    """A run of the hog study against the same run of the quiet one."""
    if h is None or q is None:
        return "missing"
    if h["status"] != "ok":
        return h["status"]
    if q["status"] != "ok":
        return f"quiet {q['status']}"
    return "agrees" if overlap(q, h) else "DIFFERS"


def verdict(gpu, cpu) -> str:
    """OpenCL run against the CPU backend, on their intervals."""
    if gpu is None or cpu is None or gpu["status"] != "ok" or cpu["status"] != "ok":
        return "excluded"
    if gpu["iteration_ci_high_ms"] < cpu["iteration_ci_low_ms"]:
        return "OpenCL faster"
    if cpu["iteration_ci_high_ms"] < gpu["iteration_ci_low_ms"]:
        return "CPU faster"
    return "no difference"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default="results/noise", help="folder for the two studies")
    ap.add_argument("--cores", type=int, default=1, help="snakemake --cores")
    ap.add_argument("--hog-s", type=float, default=3600, help="longest the hog may run (s)")
    ap.add_argument("--reuse", action="store_true", help="tabulate existing studies only")
    ap.add_argument("extra", nargs="*", help="Hydra overrides for both studies")
    a = ap.parse_args()
    quiet, hog = f"{a.results}/quiet", f"{a.results}/hog"
    timing = {}
    if not a.reuse:
        load = os.getloadavg()[0]
        timing["quiet"] = study(quiet, a.extra, a.cores) + (load,)
        procs = hogs(a.hog_s)
        try:
            load = os.getloadavg()[0]
            timing["hog"] = study(hog, a.extra, a.cores) + (load,)
        finally:
            for p in procs:
                p.kill()
                p.wait()
    for name, (secs, rc, load) in timing.items():
        print(f"{name} study: {secs:.0f} s, snakemake exit {rc}, load average at start {load:.2f}")
    q, h = runs(quiet), runs(hog)
    print("\n| run | quiet: status | median ms [95% CI] | other CPU | hog: status "
          "| median ms [95% CI] | other CPU | hog vs quiet |")
    print("|---|---|---|---|---|---|---|---|")
    bad = 0
    for rid in sorted(set(q.index) | set(h.index)):
        qr = q.loc[rid] if rid in q.index else None
        hr = h.loc[rid] if rid in h.index else None
        a_ = agree(qr, hr)
        bad += a_ == "DIFFERS"
        print(f"| {rid} | {qr['status'] if qr is not None else '-'} | {_ci(qr)} | {_share(qr)} "
              f"| {hr['status'] if hr is not None else '-'} | {_ci(hr)} | {_share(hr)} | {a_} |")
    print("\n| model | OpenCL run | quiet: OpenCL vs CPU backend | hog: OpenCL vs CPU backend "
          "| contradiction |")
    print("|---|---|---|---|---|")
    contradictions = 0
    for rid in sorted(q.index):
        r = q.loc[rid]
        if r["backend"] == "cpu":
            continue
        cpu_id = f"{r['device']}/{r['model']}.cpu.none"
        vq = verdict(r, q.loc[cpu_id] if cpu_id in q.index else None)
        hr = h.loc[rid] if rid in h.index else None
        vh = verdict(hr, h.loc[cpu_id] if cpu_id in h.index else None)
        decided = {"OpenCL faster", "CPU faster"}
        clash = vq in decided and vh in decided and vq != vh
        contradictions += clash
        print(f"| {r['model']} | {rid.split('/', 1)[1]} | {vq} | {vh} | "
              f"{'YES' if clash else 'no'} |")
    print(f"\nruns whose hog measurement is ok but outside the quiet interval: {bad}; "
          f"contradicting OpenCL-vs-CPU verdicts: {contradictions}")
    return 1 if contradictions or bad else 0


if __name__ == "__main__":
    sys.exit(main())
