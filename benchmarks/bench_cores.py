"""Is `--cores N` safe? A small study with ``snakemake --cores N``, then each run measured again
alone (``--force`` on its run.json, nothing else running), and per run the ratio of the two
medians (measurement.json ``median_ms``). Target: no ``ok`` run above 1.5x its alone figure.

Copies Snakefile, rules/, conf/ and src/ to a temporary folder and runs there. ``--unscheduled``
gives the measuring rules one host_load share instead of all and the host's jobs no
``device_host`` (``--set-resources``), as before a local measurement ran alone: the
comparison for the same host (the sweep's devices must be ``host`` only).

    python benchmarks/bench_cores.py [--cores 2] [--unscheduled] [--override KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_workflow import copy_workflow  # noqa: E402
from phonetrain.devices.cpus import availability  # noqa: E402

TINY = ["sweep=test", "measure.gemm_sizes=[64]", "measure.bandwidth_max_bytes=1048576",
        "measure.progress=false"]
MEASURING = ("train", "gemm", "tune", "tune_squares", "bandwidth", "peaks")


def snakemake(ws: Path, cores: int, overrides: list[str], *args: str) -> float:
    """Wall seconds of one Snakemake invocation in ``ws``; exits on failure."""
    cmd = [str(Path(sys.executable).with_name("snakemake")), "--cores", str(cores), *args,
           "--config", f"overrides={json.dumps(overrides)}"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=ws, env=dict(os.environ, PYTHONPATH=str(ws / "src")),
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit((p.stdout + p.stderr)[-3000:])
    return time.monotonic() - t0


SPAN = re.compile(r": ok in [0-9.]+ s \(from ([0-9.]+) to ([0-9.]+) s, Unix time\)")


def overlaps(ws: Path) -> int:
    """Jobs whose span (their log's start and end times) overlaps a local measuring job's."""
    spans = []
    for log in (ws / "results" / "logs").rglob("*.log"):
        m = SPAN.search(log.read_text())
        if m:
            rule = log.relative_to(ws / "results" / "logs").parts[0]
            spans.append((rule in MEASURING, float(m.group(1)), float(m.group(2)), log))
    return len({b[3] for a in spans if a[0] for b in spans
                if b[3] != a[3] and b[1] < a[2] and a[1] < b[2]})


def medians(ws: Path) -> dict[str, tuple[float, bool, str]]:
    """run folder (device/experiment) -> (median_ms, unstable, why) from measurement.json;
    why: the probe's slowdown, the estimate's interval half-width and the verdict's reason."""
    out = {}
    for m in sorted((ws / "results" / "runs").glob("*/*/measurement.json")):
        doc = json.loads(m.read_text())
        slow = doc.get("probe_slowdown")
        why = (f"probe {slow:.2f}x, " if slow is not None else "no probe, ") + \
            f"+-{100 * doc['ci_rel_half_width']:.1f}%" + \
            "".join(f"; {r.split(':')[0]}" for r in doc.get("reasons", []))
        out[f"{m.parent.parent.name}/{m.parent.name}"] = (doc["median_ms"], doc["unstable"], why)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--unscheduled", action="store_true",
                    help="measuring rules take one host_load share (the old scheduling)")
    ap.add_argument("--override", action="append", default=[], help="Hydra override")
    a = ap.parse_args()
    over = TINY + a.override
    extra = ["--set-resources", *[f"{r}:host_load=1" for r in MEASURING],
             *[f"{r}:device_host=0" for r in (*MEASURING, "deploy", "build_kernels")]] \
        if a.unscheduled else []
    with tempfile.TemporaryDirectory(prefix="bench-cores-") as tmp:
        ws = copy_workflow(Path(tmp))
        study_s = snakemake(ws, a.cores, over, "all", *extra)
        together, crossed = medians(ws), overlaps(ws)
        alone = {}
        for run in together:
            snakemake(ws, 1, over, "--force", f"results/runs/{run}/run.json")
            alone[run] = medians(ws)[run]
    cpus = availability()
    print(f"--cores {a.cores}{' (unscheduled)' if a.unscheduled else ''}; overrides: "
          f"{a.override or 'none'}; study {study_s:.0f} s; CPUs online {cpus.online}, "
          f"usable {cpus.usable}; load average now {os.getloadavg()[0]:.1f}; jobs overlapping a "
          f"measuring job: {crossed}")
    print("| run | median_ms --cores N | median_ms alone | ratio | status | why (--cores N) "
          "| why (alone) |")
    print("|---|---:|---:|---:|---|---|---|")
    ok_ratios = []
    for run, (med, unstable, why) in together.items():
        med_alone, unstable_alone, why_alone = alone[run]
        ratio = med / med_alone
        status = "unstable" if unstable else "ok"
        if not unstable:
            ok_ratios.append(ratio)
        print(f"| {run} | {med:.3f} | {med_alone:.3f} | {ratio:.2f} | {status}"
              f"{' (alone: unstable)' if unstable_alone else ''} | {why} | {why_alone} |")
    if ok_ratios:
        print(f"ok runs: {len(ok_ratios)}; ratio median {statistics.median(ok_ratios):.2f}, "
              f"max {max(ok_ratios):.2f} (target <= 1.5)")


if __name__ == "__main__":
    main()
