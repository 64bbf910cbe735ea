#!/usr/bin/env python3
"""Kernel edits rerun side by side: what "Since the last study" says after each edit, quiet and
under a 2-core hog, on the host and on the virtual phone, and what each rerun cost.

From one completed study (``snakemake all`` of ``sweep=test`` with ``--`` overrides, into
``<out>/base``), each scenario is an incremental rerun in a fresh copy of that workspace:

- ``comment-baseline`` / ``comment-tiled``: a comment line added to ``baseline/gemm.cl`` /
  ``tiled/gemm.cl`` (expected: every re-run row ``no change (identical build)``);
- ``plant-1.3x`` / ``plant-2x``: every GEMM loop of ``baseline/gemm.cl`` given an extra pass
  over 30% / 100% of K whose sum enters C times 0.0f (:func:`bench_noise.plant`; results
  unchanged; expected ``slower``);
- ``revert-2x``: from the 2x-planted study, the plant removed (expected ``faster``).

Each scenario runs quiet and under ``--hog`` (one busy loop per core for the whole rerun). Then
the rerun's wall time is set against re-measuring the new build alone: the same rerun with the
previous measurements moved away (``quarantine/`` emptied: nothing to pair with). Prints one
markdown row per (scenario, load, device, kind) with the verdicts counted, the paired ratios
and the wall times. ``--phone`` adds a virtual phone (:class:`phonetrain.devices.virtual.
VirtualDevice` behind the adb server, ``adb connect``; ``conf/device/vphone.yaml`` written into
each workspace from ``host.yaml``; ``sweep.devices=[host,vphone]``), which measures its own
pairs::

    python benchmarks/bench_paired.py --out /tmp/paired --phone -- 'sweep.kernels=[baseline,tiled]'
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pandas as pd  # noqa: E402

from bench_noise import hogs, plant  # noqa: E402
from phonetrain.report.changes import since_last_study  # noqa: E402

SCENARIOS = ("comment-baseline", "comment-tiled", "plant-1.3x", "plant-2x", "revert-2x")


def snakemake(ws: Path, overrides: list[str], cores: int) -> float:
    """``snakemake --cores N all`` in ``ws``; returns its wall time (s). Raises on failure."""
    env = dict(os.environ, PYTHONPATH=str(ws / "src"), PHONETRAIN_LOCK_DIR=str(ws / "locks"))
    t0 = time.time()
    p = subprocess.run([sys.executable, "-m", "snakemake", "--cores", str(cores), "all",
                        "--config", f"overrides={json.dumps(overrides)}"], cwd=ws, env=env,
                       capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(f"snakemake in {ws} failed:\n{p.stderr[-3000:]}")
    return time.time() - t0


def phone(root: Path):
    """Start a virtual phone with its sandbox under ``root`` and ``adb connect`` it; returns
    it (stop with ``.stop()``)."""
    import adbutils
    from phonetrain.devices.virtual import VirtualDevice
    vd = VirtualDevice(root, port=0).start()
    answer = adbutils.adb.connect(vd.serial, timeout=10)
    if "connected" not in answer:
        raise RuntimeError(f"adb connect {vd.serial}: {answer}")
    return vd


def add_phone(ws: Path, serial: str) -> None:
    """``conf/device/vphone.yaml``: the host's device config over adb at ``serial``."""
    import yaml
    host = yaml.safe_load((ws / "conf/device/host.yaml").read_text())
    cfg = dict(host, name="vphone", transport="adb", serial=serial, toolchain="host")
    (ws / "conf/device/vphone.yaml").write_text(yaml.safe_dump(cfg))


def workspace(dest: Path, base: Path | None = None) -> Path:
    """A copy of the repository's workflow (or of ``base``, a workspace with results)."""
    shutil.rmtree(dest, ignore_errors=True)
    if base is not None:
        shutil.copytree(base, dest, symlinks=True, ignore=shutil.ignore_patterns("locks"))
        return dest
    dest.mkdir(parents=True)
    shutil.copy2(REPO / "Snakefile", dest / "Snakefile")
    for d in ("rules", "conf", "src"):
        shutil.copytree(REPO / d, dest / d,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
    return dest


def edit(ws: Path, scenario: str) -> None:
    """Apply one scenario's kernel edit to ``ws``."""
    if scenario.startswith("comment-"):
        f = ws / "src" / "kernels" / scenario.split("-", 1)[1] / "gemm.cl"
        f.write_text("/* a comment-only edit (benchmarks/bench_paired.py) */\n" + f.read_text())
    elif scenario.startswith("plant-"):
        share = {"plant-1.3x": 0.3, "plant-2x": 1.0}[scenario]
        assert plant(ws, "baseline", share) > 0, "no GEMM loop planted"
    elif scenario == "revert-2x":
        shutil.copy2(REPO / "src" / "kernels" / "baseline" / "gemm.cl",
                     ws / "src" / "kernels" / "baseline" / "gemm.cl")


def rows_of(ws: Path) -> list:
    """The "Since the last study" rows of ``ws``'s results."""
    hist = pd.read_parquet(ws / "results" / "summary" / "history.parquet")
    return since_last_study(hist)[1]


def rerun(base: Path, dest: Path, scenario: str, overrides: list[str], cores: int,
          hog: bool, alone: bool = False) -> tuple[float, list]:
    """One incremental rerun of ``scenario`` from ``base`` in ``dest`` (``alone``: the
    previous measurements moved away first, so the new build is measured alone)."""
    ws = workspace(dest, base)
    edit(ws, scenario)
    if alone:   # nothing kept to pair with: each run and GEMM sweep forgets what it ran
        forget(ws / "results")
    procs = hogs(24 * 3600) if hog else []
    try:
        wall = snakemake(ws, overrides, cores)
    finally:
        for p in procs:
            p.kill()
    return wall, ([] if alone else rows_of(ws))


def forget(results: Path) -> None:
    """Remove what every run folder (``ran/``) and GEMM sweep (``ran``) kept of its build,
    here and in ``quarantine/``: a rerun then measures the new build alone."""
    for d in results.rglob("ran"):
        if d.is_dir() and (d / "ran.json").is_file():
            shutil.rmtree(d)
    for f in results.rglob("gemm/*/*.json"):
        doc = json.loads(f.read_text())
        if isinstance(doc, dict) and doc.pop("ran", None) is not None:
            f.write_text(json.dumps(doc))


def table(results: list[tuple[str, str, float, float | None, list]]) -> None:
    """Markdown: per scenario, load and kind, the verdicts counted, the paired ratios, the
    rerun's wall time and that of re-measuring the new build alone."""
    print("| scenario | load | device | kind | verdicts (count) | paired ratios | rerun s | "
          "alone s |")
    print("|---|---|---|---|---|---|---:|---:|")
    for scen, load, wall, alone, rows in results:
        for dev, kind in sorted({(r.device, r.kind) for r in rows}):
            rs = [r for r in rows if r.kind == kind and r.device == dev]
            words = Counter(r.verdict.split(" (")[0] for r in rs)
            ratios = sorted(r.ratio for r in rs if r.measured.startswith("side by side"))
            print(f"| {scen} | {load} | {dev} | {kind} | "
                  f"{', '.join(f'{w}: {n}' for w, n in sorted(words.items()))} | "
                  f"{', '.join(ratios) or '-'} | {wall:.0f} | "
                  f"{'-' if alone is None else f'{alone:.0f}'} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--only", default=",".join(SCENARIOS))
    ap.add_argument("--loads", default="quiet,hog")
    ap.add_argument("--alone", action="store_true",
                    help="also time each quiet rerun re-measuring the new build alone")
    ap.add_argument("--phone", action="store_true", help="add a virtual phone")
    ap.add_argument("overrides", nargs="*")
    a = ap.parse_args()
    overrides = ["sweep=test", *a.overrides]
    base = workspace(a.out / "base")
    vd = None
    if a.phone:
        vd = phone(a.out / "phone")
        add_phone(base, vd.serial)
        overrides.append("sweep.devices=[host,vphone]")
    try:
        return scenarios(a, base, overrides)
    finally:
        if vd is not None:
            vd.stop()


def scenarios(a: argparse.Namespace, base: Path, overrides: list[str]) -> int:
    """Run the base study, then every scenario of ``a.only`` under every load of ``a.loads``;
    print the table."""
    print(f"base study: {snakemake(base, overrides, a.cores):.0f} s; load at start "
          f"{os.getloadavg()[0]:.2f}", file=sys.stderr)
    planted2 = None
    results = []
    for scen in a.only.split(","):
        start = base
        if scen == "revert-2x":
            if planted2 is None:
                planted2 = workspace(a.out / "planted2", base)
                edit(planted2, "plant-2x")
                snakemake(planted2, overrides, a.cores)
            start = planted2
        for load in a.loads.split(","):
            wall, rows = rerun(start, a.out / f"{scen}-{load}", scen, overrides, a.cores,
                               hog=load == "hog")
            alone = rerun(start, a.out / f"{scen}-alone", scen, overrides, a.cores,
                          hog=False, alone=True)[0] if a.alone and load == "quiet" else None
            results.append((scen, load, wall, alone, rows))
            print(f"{scen} {load}: {wall:.0f} s, load {os.getloadavg()[0]:.2f}",
                  file=sys.stderr)
    table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
