"""What a study costs, and how much of it measures; and each stage module's start-up.

``study``: copies Snakefile, rules/, conf/ and src/ to a scratch folder, runs ``snakemake
--cores N all`` there with a fresh results folder, and prints, per rule: jobs; summed job time
split into start-up (Snakemake starts the job -> the stage starts its work: shell, interpreter,
imports, argument parsing), work and waiting (device locks, cool-downs); measuring time (the
runner processes that measure: runs, GEMM sweeps and tuning, bandwidth, peaks); then the
study's wall time, the time outside every job (Snakemake's parse, DAG, bookkeeping), the
overhead share 1 - measuring / wall, the slowest start-up, the measuring seconds by runner
mode and the measuring bounds the study printed (phonetrain.stages.cost.bounds_line). A
job's start is Snakemake's own record (``.snakemake/metadata``: the mtime of the job's
incomplete marker); its stage span, waits and runner processes come from its log
(phonetrain.stages.job, phonetrain.stages.cost). Jobs that run inside Snakemake (``run:``:
aggregate, report) count as work from their start to their last output.

``startup``: the median wall time (of ``--repeat``) of ``python -c 'import
phonetrain.stages.X'`` for every module of src/phonetrain/stages, for one or more checkouts'
src/ (``--src``, repeatable: runs interleaved), with the heavy libraries each one loads.

    python benchmarks/bench_study_cost.py study [--cores 1] [--override sweep=test ...] [--keep DIR]
    python benchmarks/bench_study_cost.py startup [--repeat 5] [--src /tmp/before/src --src src]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from phonetrain.stages import cost  # noqa: E402

HEAVY = ("pandas", "pyarrow", "matplotlib", "hydra", "scipy", "sklearn", "numpy")


# ------------------------------------------------------------------ stage start-up

def startup(srcs: list[Path], repeat: int) -> None:
    """One row per stage module: its median import wall time and CPU time (user + system:
    less sensitive to other work than the wall) under each of ``srcs`` (runs interleaved, so a
    changing load falls on every column alike) and what the last loads."""
    py = sys.executable
    mods = sorted(p.stem for p in (srcs[-1] / "phonetrain" / "stages").glob("*.py")
                  if p.stem != "__init__")
    print(f"median of {repeat}, interleaved; {os.cpu_count()} CPUs; load average "
          f"{os.getloadavg()[0]:.1f} at start")
    for i, src in enumerate(srcs):
        print(f"src {i}: {src}")
    cols = " | ".join(f"src {i} wall_s / cpu_s" for i in range(len(srcs)))
    print(f"| module | {cols} | heavy libraries loaded (src {len(srcs) - 1}) |")
    print("|---|" + "---:|" * len(srcs) + "---|")
    for name, code in [("(python -c pass)", "pass")] + [
            (f"stages.{m}", f"import phonetrain.stages.{m}") for m in mods]:
        walls: list[list[float]] = [[] for _ in srcs]
        cpus: list[list[float]] = [[] for _ in srcs]
        here = [name.startswith("(") or (src / "phonetrain" / "stages" / f"{name[7:]}.py")
                .is_file() for src in srcs]
        for _ in range(repeat):
            for i, src in enumerate(srcs):
                if not here[i]:
                    continue
                env = dict(os.environ, PYTHONPATH=str(src))
                t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
                subprocess.run([py, "-c", code], env=env, check=False, capture_output=True)
                walls[i].append(time.perf_counter() - t0)
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpus[i].append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
        probe = (f"{code}; import sys; print(' '.join(m for m in {HEAVY!r} "
                 "if m in sys.modules))")
        heavy = subprocess.run([py, "-c", probe], env=dict(os.environ, PYTHONPATH=str(srcs[-1])),
                               capture_output=True, text=True).stdout.strip()
        cells = " | ".join(f"{statistics.median(w):.3f} / {statistics.median(c):.3f}" if w
                           else "-" for w, c in zip(walls, cpus))
        print(f"| {name} | {cells} | {heavy or '-'} |")
    print(f"load average {os.getloadavg()[0]:.1f} at end")


# ------------------------------------------------------------------ study cost

def snakemake_jobs(ws: Path, since_s: float) -> list[dict]:
    """Snakemake's records of the jobs that started at or after ``since_s``: one dict per
    job (rule, log, start_s, end_s: the latest output's mtime), from .snakemake/metadata."""
    jobs: dict[tuple, dict] = {}
    for f in (ws / ".snakemake" / "metadata").rglob("*"):
        if not f.is_file():
            continue
        try:
            rec = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if (rec.get("starttime") or 0) < since_s:
            continue
        key = (rec["rule"], tuple(rec.get("log") or [f.name]))
        j = jobs.setdefault(key, {"rule": rec["rule"], "log": key[1][0],
                                  "start_s": rec["starttime"], "end_s": rec["endtime"]})
        j["end_s"] = max(j["end_s"], rec["endtime"])
    return list(jobs.values())


def cost_rows(ws: Path, results: Path, since_s: float) -> tuple[dict, list[tuple], float]:
    """Per rule: jobs, start-up, work, waiting, measuring seconds and the slowest start-up;
    and the union of the jobs' spans (s)."""
    stage = {str(Path(j.log).relative_to(ws)): j
             for j in cost.jobs_since(results / "logs", since_s)}
    rules: dict[str, dict] = defaultdict(lambda: defaultdict(float))
    spans, slowest = [], []
    for j in snakemake_jobs(ws, since_s):
        r, s = rules[j["rule"]], stage.get(j["log"])
        r["jobs"] += 1
        if s is None:   # a job without a stage log: its Snakemake record only
            r["work"] += j["end_s"] - j["start_s"]
            spans.append((j["start_s"], j["end_s"]))
            continue
        up = max(0.0, s.from_s - j["start_s"])   # 0: inside Snakemake (no start recorded)
        r["startup"] += up
        r["wait"] += s.wait_s
        r["work"] += s.to_s - s.from_s - s.wait_s
        r["measuring"] += sum(s.measuring_s().values())
        r["max_startup"] = max(r["max_startup"], up)
        slowest.append((up, j["log"]))
        spans.append((min(j["start_s"], s.from_s), max(s.to_s, j["end_s"])))
    return rules, sorted(slowest, reverse=True), _union(spans)


def _union(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def study(cores: int, overrides: list[str], keep: Path | None) -> None:
    tmp = tempfile.mkdtemp(prefix="bench-study-cost-") if keep is None else str(keep)
    ws = Path(tmp)
    shutil.copy2(REPO / "Snakefile", ws / "Snakefile")
    for d in ("rules", "conf", "src"):
        shutil.copytree(REPO / d, ws / d, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.rmtree(ws / "results", ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(ws / "src"))
    cmd = [str(Path(sys.executable).with_name("snakemake")), "--cores", str(cores), "all",
           "--config", f"overrides={json.dumps(overrides)}"]
    load0, since = os.getloadavg()[0], time.time()
    p = subprocess.run(cmd, cwd=ws, env=env, capture_output=True, text=True)
    wall = time.time() - since
    if p.returncode != 0:
        print((p.stdout + p.stderr)[-3000:], file=sys.stderr)
    closing = [ln for ln in p.stderr.splitlines() if ln.startswith("phonetrain: study:")]
    bounds = [ln for ln in p.stderr.splitlines() if ln.startswith("phonetrain: measuring bounds")]
    rules, slowest, in_jobs = cost_rows(ws, ws / "results", since)
    print(bounds[0] if bounds else "measuring bounds: (not printed)")
    report(rules, slowest, wall, in_jobs,
           f"overrides: {overrides or 'none'}; --cores {cores}; {os.cpu_count()} CPUs; load "
           f"average {load0:.1f} at start, {os.getloadavg()[0]:.1f} at end; exit {p.returncode}")
    by_mode = cost.measuring_s(cost.jobs_since(ws / "results" / "logs", since))
    print("measuring s by runner mode: " + ", ".join(f"{k} {v:.1f}" for k, v in by_mode.items()))
    print(f"closing line: {closing[-1] if closing else '(none)'}")
    if keep is None:
        shutil.rmtree(ws, ignore_errors=True)


def report(rules: dict, slowest: list, wall: float, in_jobs: float, head: str) -> None:
    print(head)
    print("| rule | jobs | start-up_s | work_s | waiting_s | measuring_s | max start-up_s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    tot = defaultdict(float)
    for name, r in sorted(rules.items(), key=lambda kv: -(kv[1]["startup"] + kv[1]["work"])):
        print(f"| {name} | {r['jobs']:.0f} | {r['startup']:.1f} | {r['work']:.1f} | "
              f"{r['wait']:.1f} | {r['measuring']:.1f} | {r['max_startup']:.2f} |")
        for k in ("jobs", "startup", "work", "wait", "measuring"):
            tot[k] += r[k]
    print(f"| **all** | {tot['jobs']:.0f} | {tot['startup']:.1f} | {tot['work']:.1f} | "
          f"{tot['wait']:.1f} | {tot['measuring']:.1f} | "
          f"{slowest[0][0] if slowest else 0:.2f} |")
    print(f"wall {wall:.1f} s; outside every job (Snakemake: parse, DAG, bookkeeping) "
          f"{wall - in_jobs:.1f} s; measuring {tot['measuring']:.1f} s; overhead share "
          f"1 - measuring / wall = {100 * (1 - tot['measuring'] / wall):.0f}%")
    if slowest:
        print(f"slowest start-up: {slowest[0][0]:.2f} s ({slowest[0][1]})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("study")
    s.add_argument("--cores", type=int, default=1)
    s.add_argument("--override", action="append", default=[], help="Hydra override")
    s.add_argument("--keep", type=Path, help="run in this folder and keep it")
    u = sub.add_parser("startup")
    u.add_argument("--repeat", type=int, default=5)
    u.add_argument("--src", type=Path, action="append",
                   help="a checkout's src/ (repeatable; default this checkout's)")
    a = ap.parse_args()
    if a.what == "study":
        study(a.cores, a.override, a.keep)
    else:
        startup([p.resolve() for p in a.src or [REPO / "src"]], a.repeat)


if __name__ == "__main__":
    main()
