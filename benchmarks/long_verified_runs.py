#!/usr/bin/env python3
"""Long training runs of every OpenCL configuration on one device, each verified step by step.

For each model x kernel version x placement (resident/copy, staged/copy, staged/map), batch 32
on digits: the workflow's plan (lowered as ``phonetrain.stages.train.lower`` does; with
``--tune``, the device's tuning of the tunable versions applied as the deploy stage does,
through the workflow's own tune stage function), run by the runner for ``--iterations``
measured iterations with the default checkpoints (the first two and the last two
iterations), then verified: per step from the runner's own state (the verdict) and over the
whole trajectory (the drift: its largest error and the first iteration whose loss leaves the
per-step bound). ``--dense CONFIG:A-B`` checkpoints every iteration A..B of one configuration
(``lenet5.baseline.resident-copy:0-110``) and checks each of those steps: a kernel fault fails
the step it occurs in, an honest near-tie flip passes (decisions followed) while the
trajectory drifts. Prints markdown tables; ``--out DIR`` keeps ``runs.json``.

Needs numpy, pandas, PyYAML and ``cc`` (no Hydra, no Snakemake, no scikit-learn when ``--data``
names a staging root that already holds ``data/digits/...``, e.g. one written by
``phonetrain.data.write_batches``)::

    python benchmarks/long_verified_runs.py --platform NVIDIA --tune --iterations 200
    python benchmarks/long_verified_runs.py --platform Portable --models mlp_784_256_128_16 \\
        --versions baseline --iterations 20
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from phonetrain.devices.cpus import usable_cpus
from phonetrain import reference  # noqa: E402
from phonetrain.devices.toolchains import build_runner  # noqa: E402
from phonetrain.io import write_json  # noqa: E402
from phonetrain.kernels import load_version, stage_kernels, tuning  # noqa: E402
from phonetrain.kernels.gemm import GemmShape, plan_shapes  # noqa: E402
from phonetrain.layout import plan_dir_rel  # noqa: E402
from phonetrain.lowering import LowerSpec, lower, write_plan_dir  # noqa: E402
from phonetrain.plan import Plan  # noqa: E402
from phonetrain.results import profiling, stats  # noqa: E402
from phonetrain.runner import Runner, RunnerError, read_trace  # noqa: E402
from phonetrain.stages import gemm as gemm_stage  # noqa: E402
from phonetrain.stages.job import Job, Runtime, files  # noqa: E402

PLACEMENTS = {"resident-copy": ("resident", "copy"), "staged-copy": ("staged", "copy"),
              "staged-map": ("staged", "map")}
LR = {"lenet5": 0.05, "mlp_784_256_128_16": 0.05}   # conf/model/<name>.yaml


def device_config(a) -> dict:
    return {"name": "bench", "transport": "local", "opencl_library": None,
            "opencl_platform": a.platform or "", "opencl_device": a.device or ""}


def model_shapes(models: list[str]) -> list[dict]:
    """The models' distinct GEMM calls (as ``phonetrain.stages.params.sweep_gemm_shapes``)."""
    out: dict = {}
    for m in models:
        plan = lower(LowerSpec(model=m, batch_size=32, backend="opencl", placement="resident",
                               transfer="copy", kernel="baseline", dataset="digits"))
        for g in plan_shapes(plan):
            out.setdefault(g, f"model:{m}")
    return [{"kernel": g.kernel, "M": g.M, "N": g.N, "K": g.K, "source": s} for g, s in out.items()]


def tune_versions(a, root: Path, runner: Path, versions: list[str]) -> dict[str, list[Path]]:
    """The workflow's tune stage for each tunable version and each GEMM class of the models;
    returns version -> its class files."""
    out = {}
    shapes = [GemmShape(s["kernel"], s["M"], s["N"], s["K"]) for s in model_shapes(a.models)]
    classes = list(dict.fromkeys(tuning.gemm_class(g) for g in shapes))
    for v in versions:
        if not tuning.tunable(v):
            continue
        params = {"device": "bench", "device_config": device_config(a), "stage_root": str(root),
                  "kernel": v, "kernel_hash": "bench", "tune": True, "tune_min_time_ms": 20.0}
        t0 = time.time()
        paths, chosen = [], {}
        try:
            for cls in classes:
                path = root / "tuning" / v / f"{cls}.json"
                job = Job(files({"runner": str(runner), "sources": []}),
                          files({"tuning": str(path)}), {**params, "class": cls},
                          root / "logs" / f"tune-{v}-{cls}.log", Runtime(600.0, False))
                doc = gemm_stage.tune(job)
                chosen.update({c: d["defines"] for c, d in doc["classes"].items()})
                paths.append(path)
        except Exception as e:  # noqa: BLE001  (a version this device cannot run)
            print(f"tune {v}: {e}", file=sys.stderr)
            continue
        print(f"tune {v}: {time.time() - t0:.0f} s, classes {chosen}", file=sys.stderr)
        out[v] = paths
    return out


def configs(a) -> list[tuple[str, str, str]]:
    return [(m, v, p) for m in a.models for v in a.versions for p in a.placements]


def prepare(a, root: Path, model: str, version: str, placement: str, tuned: dict,
            checkpoints: tuple[int, ...]) -> str:
    pl, tr = PLACEMENTS[placement]
    pid = f"{model}.{version}.{placement}" + ("" if checkpoints == (0, 1, -2, -1) else ".dense")
    spec = LowerSpec(model=model, batch_size=32, backend="opencl", placement=pl, transfer=tr,
                     kernel=version, dataset="digits", num_batches=8, warmup=a.warmup,
                     iterations=a.iterations, seed=0, lr=LR.get(model, 0.05), plan_id=pid,
                     checkpoints=checkpoints)
    pdir = write_plan_dir(spec, root)
    if version in tuned:
        plan, _ = tuning.tune_plan(Plan.load(pdir / "plan.json"), load_version(version),
                                   tuning.load_tunings(tuned[version]))
        plan.save(pdir / "plan.json")
    stage_kernels(version, root)
    return pid


def verify(root: str, pid: str) -> dict:
    """Per-step and trajectory verification of one run, plus its timing and resolution."""
    root_p = Path(root)
    out = root_p / "out" / pid
    plan = Plan.load(root_p / plan_dir_rel(pid) / "plan.json")
    t0 = time.time()
    doc = reference.verify_run_dir(plan, root_p, out)
    run = json.loads((out / "run.json").read_text())
    walls = [i["wall_ms"] for i in run["iters"] if not i["warmup"]]
    med, lo, hi = stats.median_ci(walls)
    it = [{"iteration": i["iteration"], "wall_ms": i["wall_ms"], "measured": not i["warmup"]}
          for i in run["iters"]]
    import pandas as pd
    below = profiling.below_resolution(read_trace(out), pd.DataFrame(it),
                                       run.get("timer_resolution_ns"))
    steps = doc["steps"]
    return {"config": pid, "ok": doc["ok"], "iterations": len(walls),
            "checked": [s["iteration"] for s in steps],
            "failed": doc["failed_iterations"], "worst": doc["worst"],
            "max_abs_err": doc["max_abs_err"], "tolerance": doc["tolerance"],
            "followed": sum(s["decisions_followed"] for s in steps),
            "drift_max": doc["trajectory"]["drift_max"],
            "drift_from": doc["trajectory"]["drift_from_iteration"],
            "loss_first": run["iters"][0]["loss"], "loss_last": run["iters"][-1]["loss"],
            "median_ms": med, "ci_low_ms": lo, "ci_high_ms": hi,
            "timer_resolution_ns": run.get("timer_resolution_ns"), **below,
            "conditions": run.get("conditions"), "device": (run.get("device") or {}).get("name"),
            "verify_s": time.time() - t0,
            "steps": [{**{k: s[k] for k in ("iteration", "ok", "worst_tensor", "ratio",
                                            "decisions_followed")},
                       **({} if s["ok"] else {"tensors": s["tensors"]})} for s in steps],
            "loss_abs_diff": [abs(x - y) for x, y in zip(doc["trajectory"]["run_losses"],
                                                          doc["trajectory"]["ref_losses"])]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runner", help="runner binary (default: build one with cc)")
    ap.add_argument("--platform"), ap.add_argument("--device")
    ap.add_argument("--models", default="lenet5,mlp_784_256_128_16")
    ap.add_argument("--versions", default="baseline,tiled,regblock,image,clblast")
    ap.add_argument("--placements", default=",".join(PLACEMENTS))
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--data", help="staging root holding data/digits/... (default: write it)")
    ap.add_argument("--tune", action="store_true", help="the workflow's tuning, applied")
    ap.add_argument("--dense", action="append", default=[],
                    help="MODEL.VERSION.PLACEMENT:A-B: checkpoint every iteration A..B")
    ap.add_argument("--jobs", type=int, default=usable_cpus())
    ap.add_argument("--out", help="folder for runs.json")
    a = ap.parse_args()
    a.models, a.versions = a.models.split(","), a.versions.split(",")
    a.placements = a.placements.split(",")
    root = Path(tempfile.mkdtemp(prefix="phonetrain-long-"))
    runner = Path(a.runner) if a.runner else build_runner(root / "build")
    if a.data:
        os.symlink(Path(a.data).resolve() / "data", root / "data")
    else:
        from phonetrain.data import write_batches
        for m in a.models:
            from phonetrain.models import get_model
            mm = get_model(m)
            write_batches("digits", 32, 8, root, seed=0, input_shape=mm.input_shape,
                          classes=mm.classes)
    r = Runner.for_device(device_config(a), root, timeout_s=600)
    r.push_runner(runner)
    tuned = tune_versions(a, root, runner, a.versions) if a.tune else {}
    todo = [(m, v, p, (0, 1, -2, -1)) for m, v, p in configs(a)]
    for d in a.dense:
        cfg, span = d.split(":")
        m, v, p = cfg.split(".")
        lo, hi = (int(x) for x in span.split("-"))
        todo.append((m, v, p, tuple(range(lo, hi + 1))))
    results, pids = [], []
    for m, v, p, ck in todo:
        pid = prepare(a, root, m, v, p, tuned, ck)
        t0 = time.time()
        try:
            r.run(f"{plan_dir_rel(pid)}/plan.json", root / "out" / pid)
        except RunnerError as e:
            results.append({"config": pid, "ok": None, "error": str(e).splitlines()[0]})
            print(f"{pid}: {str(e).splitlines()[0]}", file=sys.stderr)
            continue
        print(f"{pid}: ran in {time.time() - t0:.1f} s", file=sys.stderr, flush=True)
        pids.append(pid)
    print(f"{a.iterations} measured iterations after {a.warmup} warm-up, batch 32, digits; "
          f"tuned: {sorted(tuned) or 'no'}\n")
    print("| configuration | per-step verdict | steps checked | worst step/tensor (error/bound) "
          "| near-ties followed | trajectory drift (max, from iteration) | loss first -> last "
          "| median ms [95% CI] | below timer resolution |")
    print("|---|---|---|---|---|---|---|---|---|", flush=True)
    for x in results:
        _row(x)
    with ProcessPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        for x in pool.map(verify, [str(root)] * len(pids), pids):
            results.append(x)
            _row(x)
    print(f"\ndevice: {next((x['device'] for x in results if x.get('device')), '?')}")
    if a.out:
        write_json({"results": results, "tuned": {k: [str(x) for x in v] for k, v in tuned.items()},
                    "tuning": {k: tuning.load_tunings(v) for k, v in tuned.items()}},
                   Path(a.out) / "runs.json")
    return 0 if all(x.get("ok") in (True, None) for x in results) else 1


def _row(x: dict) -> None:
    """One markdown row of the table."""
    if x.get("ok") is None:
        print(f"| {x['config']} | not run: {x.get('error', '')[:80]} | | | | | | | |", flush=True)
        return
    w = x["worst"]
    checked = x["checked"] if len(x["checked"]) <= 4 else \
        f"{len(x['checked'])} ({x['checked'][0]}..{x['checked'][-1]})"
    below = "-" if x["below_resolution_commands"] is None else (
        f"{x['below_resolution_commands']} cmds; kernels all: {x['kernel_below_resolution']}, "
        f"transfers all: {x['transfer_below_resolution']}")
    print(f"| {x['config']} | {'ok' if x['ok'] else 'FAIL ' + str(x['failed'])} | {checked} "
          f"| {w['iteration']} {w['tensor']} ({w['ratio']:.2f}) | {x['followed']} "
          f"| {x['drift_max']:.2g}, {x['drift_from']} "
          f"| {x['loss_first']:.3f} -> {x['loss_last']:.3f} "
          f"| {x['median_ms']:.3f} [{x['ci_low_ms']:.3f}, {x['ci_high_ms']:.3f}] | {below} |",
          flush=True)


if __name__ == "__main__":
    sys.exit(main())
