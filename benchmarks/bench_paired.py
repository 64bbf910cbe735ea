#!/usr/bin/env python3
"""Kernel edits rerun side by side: what "Since the last study" says after each edit, quiet or
under a 2-core hog, on the host and on the virtual phone, and what each rerun cost.

From one completed study (``snakemake all`` of ``sweep=test`` with ``--`` overrides, into
``<out>/base``), each scenario is an incremental rerun in a fresh copy of that workspace
(its Python package refreshed from this checkout: the code under test):

- ``comment-baseline`` / ``comment-tiled``: a comment line added to ``baseline/gemm.cl`` /
  ``tiled/gemm.cl`` (expected: every re-run row ``no change (identical build)``);
- ``plant-1.3x`` / ``plant-2x``: every GEMM loop of ``baseline/gemm.cl`` given an extra pass
  over 30% / 100% of K whose sum enters C times 0.0f (:func:`bench_noise.plant`; results
  unchanged; expected ``slower``);
- ``revert-1.3x`` / ``revert-2x``: from the rerun of that plant (its workspace), the plant
  removed (expected ``faster``).

Each scenario runs under every load of ``--loads``: ``quiet`` (nothing of ours) or ``hog``
(two shell busy loops, ``while :; do :; done``, for the whole rerun, killed after). With
``--alone`` the rerun's wall time is set against re-measuring the new build alone under the
same load: the same rerun with what every run and sweep kept of its build forgotten (nothing
to pair with). Each finished scenario appends its rows to ``<out>/rows.jsonl`` (so a cut-off
run keeps what it measured); at the end one markdown row per (scenario, load, device, kind)
with the verdicts counted, the side-by-side ratios, the pairs, the wall times and the load
average. ``--phone`` adds a virtual phone (:class:`phonetrain.devices.virtual.VirtualDevice`
behind the adb server, ``adb connect``; ``conf/device/vphone.yaml`` written into each
workspace from ``host.yaml``; ``sweep.devices=[host,vphone]``), which measures its own pairs.
``--wait-for FILE``: the reruns wait until FILE exists (the base study can start first)::

    python benchmarks/bench_paired.py --out /tmp/paired --phone --alone --loads hog \
        --only plant-1.3x,revert-1.3x,comment-tiled -- 'sweep.kernels=[baseline,tiled]'
"""

from __future__ import annotations

import argparse
import json
import math
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

from bench_noise import plant  # noqa: E402
from phonetrain.report.changes import since_last_study  # noqa: E402

SCENARIOS = ("plant-1.3x", "revert-1.3x", "comment-tiled", "comment-baseline", "plant-2x",
             "revert-2x")
HOG = "while :; do :; done"
HOG_LOOPS = 2


def snakemake(ws: Path, overrides: list[str], cores: int) -> float:
    """``snakemake --cores N all`` in ``ws``; returns its wall time (s). Raises on failure."""
    env = dict(os.environ, PYTHONPATH=str(ws / "src"), PHONETRAIN_LOCK_DIR=str(ws / "locks"))
    t0 = time.time()
    p = subprocess.run([sys.executable, "-m", "snakemake", "--cores", str(cores), "all",
                        "--config", f"overrides={json.dumps(overrides)}"], cwd=ws, env=env,
                       capture_output=True, text=True)
    (ws / "snakemake.log").write_text(p.stderr)
    if p.returncode:
        raise RuntimeError(f"snakemake in {ws} failed:\n{p.stderr[-3000:]}")
    return time.time() - t0


def phone(root: Path, port: int = 0):
    """Start a virtual phone with its sandbox under ``root`` (on ``port``; 0: any) and ``adb
    connect`` it; returns it (stop with ``.stop()``)."""
    import adbutils
    from phonetrain.devices.virtual import VirtualDevice
    vd = VirtualDevice(root, port=port).start()
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


IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")


def workspace(dest: Path, base: Path | None = None) -> Path:
    """A copy of the repository's workflow, or of ``base`` (a workspace with results) with
    its Python package replaced by this checkout's."""
    shutil.rmtree(dest, ignore_errors=True)
    if base is not None:
        shutil.copytree(base, dest, symlinks=True, ignore=shutil.ignore_patterns("locks"))
        shutil.rmtree(dest / "src" / "phonetrain")
        shutil.copytree(REPO / "src" / "phonetrain", dest / "src" / "phonetrain", ignore=IGNORE)
        return dest
    dest.mkdir(parents=True)
    shutil.copy2(REPO / "Snakefile", dest / "Snakefile")
    for d in ("rules", "conf", "src"):
        shutil.copytree(REPO / d, dest / d, ignore=IGNORE)
    return dest


def edit(ws: Path, scenario: str) -> None:
    """Apply one scenario's kernel edit to ``ws``."""
    if scenario.startswith("comment-"):
        f = ws / "src" / "kernels" / scenario.split("-", 1)[1] / "gemm.cl"
        f.write_text("/* a comment-only edit (benchmarks/bench_paired.py) */\n" + f.read_text())
    elif scenario.startswith("plant-"):
        share = {"plant-1.3x": 0.3, "plant-2x": 1.0}[scenario]
        assert plant(ws, "baseline", share) > 0, "no GEMM loop planted"
    elif scenario.startswith("revert-"):
        shutil.copy2(REPO / "src" / "kernels" / "baseline" / "gemm.cl",
                     ws / "src" / "kernels" / "baseline" / "gemm.cl")


def rows_of(ws: Path) -> list:
    """The "Since the last study" rows of ``ws``'s results."""
    hist = pd.read_parquet(ws / "results" / "summary" / "history.parquet")
    return since_last_study(hist)[1]


def hog() -> list[subprocess.Popen]:
    """:data:`HOG_LOOPS` shell busy loops (each its own process group); kill with
    :func:`unhog`."""
    return [subprocess.Popen(["bash", "-c", HOG], start_new_session=True)
            for _ in range(HOG_LOOPS)]


def unhog(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        os.killpg(p.pid, 9)
        p.wait()


def rerun(base: Path, dest: Path, scenario: str, overrides: list[str], cores: int,
          hogged: bool, alone: bool = False) -> dict:
    """One incremental rerun of ``scenario`` from ``base`` in ``dest`` (``alone``: what was
    kept of every build forgotten first, so the new build is measured alone): its wall time
    (s), the load average before and after, and (paired) its "Since the last study" rows."""
    ws = workspace(dest, base)
    edit(ws, scenario)
    if alone:
        forget(ws / "results")
    load0 = os.getloadavg()[0]
    procs = hog() if hogged else []
    try:
        wall = snakemake(ws, overrides, cores)
    finally:
        unhog(procs)
    return {"wall_s": wall, "load": [load0, os.getloadavg()[0]],
            "rows": [] if alone else [r._asdict() if hasattr(r, "_asdict") else vars(r)
                                      for r in rows_of(ws)]}


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


def table(results: list[dict]) -> None:
    """Markdown: per scenario, load, device and kind, the verdicts counted, the side-by-side
    ratios and pairs, the rerun's wall time, that of re-measuring the new build alone and the
    load average around the rerun."""
    print("| scenario | load | device | kind | verdicts (count) | side-by-side ratios | pairs | "
          "rerun s | alone s | load avg |")
    print("|---|---|---|---|---|---|---|---:|---:|---|")
    for res in results:
        rows, alone = res["rows"], res.get("alone_s")
        for dev, kind in sorted({(r["device"], r["kind"]) for r in rows}):
            rs = [r for r in rows if r["kind"] == kind and r["device"] == dev]
            words = Counter(r["verdict"].split(" (")[0] for r in rs)
            side = [r for r in rs if r["measured"].startswith("side by side")]
            ratios = sorted(r["ratio"] for r in side)
            pairs = sorted(int(r["measured"].split(", ")[1].split()[0]) for r in side
                           if ", " in r["measured"])
            print(f"| {res['scenario']} | {res['hog']} | {dev} | {kind} | "
                  f"{', '.join(f'{w}: {n}' for w, n in sorted(words.items()))} | "
                  f"{', '.join(ratios) or '-'} | "
                  f"{f'{pairs[0]}-{pairs[-1]}' if pairs else '-'} | {res['wall_s']:.0f} | "
                  f"{'-' if alone is None else f'{alone:.0f}'} | "
                  f"{res['load'][0]:.1f}-{res['load'][1]:.1f} |")


def signed_rank_interval(ratios: list[float], confidence: float = 0.95
                         ) -> tuple[float, float, float] | None:
    """The Hodges-Lehmann estimate of the pairs' ratio and its distribution-free interval
    (the Wilcoxon signed-rank interval over the Walsh averages of the log ratios; Hollander
    & Wolfe, Nonparametric Statistical Methods, 3.2): a robust reading of the same pairs, for
    comparison with the product's t interval. None below 6 pairs (no 95% interval exists)."""
    logs = [math.log(r) for r in ratios if r and r > 0]
    n = len(logs)
    counts = [1]   # counts[t]: sign patterns whose positive ranks sum to t
    for k in range(1, n + 1):
        counts = [(counts[t] if t < len(counts) else 0) + (counts[t - k] if t >= k else 0)
                  for t in range(len(counts) + k)]
    total, cum, crit = 2 ** n, 0, 0
    for t, c in enumerate(counts):
        cum += c
        if cum / total > (1 - confidence) / 2:
            crit = t   # the interval: the (crit+1)-th lowest and highest Walsh averages
            break
    if crit == 0:
        return None
    walsh = sorted((logs[i] + logs[j]) / 2 for i in range(n) for j in range(i, n))
    mid = walsh[len(walsh) // 2] if len(walsh) % 2 else \
        (walsh[len(walsh) // 2 - 1] + walsh[len(walsh) // 2]) / 2
    return math.exp(mid), math.exp(walsh[crit - 1]), math.exp(walsh[-crit])


def detail(ws: Path, min_dim: int = 256) -> None:
    """Markdown: every side-by-side run and GEMM shape with a dimension of ``min_dim`` or more
    in ``ws``'s results: verdict, ratio [t interval], pairs, what stopped them, and the
    signed-rank reading of the same pairs (:func:`signed_rank_interval`)."""
    items = []
    for f in sorted((ws / "results" / "runs").glob("*/*/paired.json")):
        items.append((f.parent.parent.name, "run", f.parent.name, json.loads(f.read_text())))
    for f in sorted((ws / "results" / "gemm").glob("*/*.json")):
        for r in json.loads(f.read_text()).get("rows", []):
            if r.get("paired") and max(r["M"], r["N"], r["K"]) >= min_dim:
                items.append((f.parent.name, "gemm", f"{f.stem} {r['kernel']} "
                              f"{r['M']}x{r['N']}x{r['K']}", r["paired"]))
    print("| device | kind | subject | verdict | ratio [95% t interval] | pairs | stopped | "
          "signed-rank ratio [95%] |")
    print("|---|---|---|---|---|---|---|---|")
    for dev, kind, subject, v in items:
        if v.get("identical_build"):
            print(f"| {dev} | {kind} | {subject} | no change (identical build) | - | 0 | - | - |")
            continue
        sr = signed_rank_interval([b / a for a, b in v.get("pairs_ms", []) if a and b])
        t = f"{v['ratio']:.2f}x [{v['low']:.2f}-{v['high']:.2f}]" if v.get("ratio") else "-"
        print(f"| {dev} | {kind} | {subject} | {v['verdict']} | {t} | {v['pairs']} | "
              f"{v.get('stopped', '-')} | "
              f"{'-' if sr is None else f'{sr[0]:.2f}x [{sr[1]:.2f}-{sr[2]:.2f}]'} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--only", default=",".join(SCENARIOS))
    ap.add_argument("--loads", default="quiet,hog")
    ap.add_argument("--alone", action="store_true",
                    help="also time each rerun re-measuring the new build alone")
    ap.add_argument("--alone-only", action="store_true",
                    help="only the reruns re-measuring the new build alone")
    ap.add_argument("--phone", action="store_true", help="add a virtual phone")
    ap.add_argument("--wait-for", type=Path, help="start the reruns once this file exists")
    ap.add_argument("--reuse-base", action="store_true",
                    help="<out>/base holds a completed study (and its virtual phone's port)")
    ap.add_argument("--table", action="store_true",
                    help="print the table of <out>/rows.jsonl and stop")
    ap.add_argument("--detail", type=Path, metavar="WORKSPACE",
                    help="print each side-by-side row of a rerun's workspace and stop")
    ap.add_argument("overrides", nargs="*")
    a = ap.parse_args()
    if a.detail:
        detail(a.detail)
        return 0
    if a.table:
        table([json.loads(x) for x in (a.out / "rows.jsonl").read_text().splitlines()])
        return 0
    overrides = ["sweep=test", *a.overrides]
    base = a.out / "base" if a.reuse_base else workspace(a.out / "base")
    vd = None
    if a.phone:
        vphone = base / "conf/device/vphone.yaml"
        port = int(vphone.read_text().split("serial: ")[1].split(":")[1].split()[0]) \
            if a.reuse_base else 0   # the same serial: the base study's vphone settings
        vd = phone(a.out / "phone", port)
        add_phone(base, vd.serial)
        overrides.append("sweep.devices=[host,vphone]")
    try:
        return scenarios(a, base, overrides)
    finally:
        if vd is not None:
            vd.stop()


def scenarios(a: argparse.Namespace, base: Path, overrides: list[str]) -> int:
    """Run the base study, then every scenario of ``a.only`` under every load of ``a.loads``
    (a revert starts from its plant's rerun under the same load, run first if not asked);
    append each to ``<out>/rows.jsonl``; print the table."""
    if not a.reuse_base:
        print(f"base study: {snakemake(base, overrides, a.cores):.0f} s; load at start "
              f"{os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
    while a.wait_for is not None and not a.wait_for.exists():
        time.sleep(10)
    results = []
    for scen in a.only.split(","):
        for load in a.loads.split(","):
            start = base
            if scen.startswith("revert-"):
                start = a.out / f"plant-{scen.split('-', 1)[1]}-{load}"
                if not (start / "results").is_dir():
                    rerun(base, start, "plant-" + scen.split("-", 1)[1], overrides, a.cores,
                          hogged=load == "hog")
            res = {"wall_s": float("nan"), "load": [float("nan")] * 2, "rows": []} \
                if a.alone_only else rerun(start, a.out / f"{scen}-{load}", scen, overrides,
                                           a.cores, hogged=load == "hog")
            if a.alone or a.alone_only:
                res["alone_s"] = rerun(start, a.out / f"{scen}-{load}-alone", scen, overrides,
                                       a.cores, hogged=load == "hog", alone=True)["wall_s"]
            res |= {"scenario": scen, "hog": load}
            with open(a.out / "rows.jsonl", "a") as f:
                f.write(json.dumps(res, default=str) + "\n")
            print(f"{scen} {load}: {res['wall_s']:.0f} s (alone {res.get('alone_s')}), load "
                  f"{res['load']}", file=sys.stderr, flush=True)
            results.append(res)
    table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
