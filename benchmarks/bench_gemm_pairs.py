#!/usr/bin/env python3
"""Side-by-side GEMM pairs: two processes per pair, or one process with both builds' repeats
alternating? The spread of the pairs' ratios and the pairs each verdict needs, for a planted
change, both ways in one run on this host's OpenCL device (PoCL by default).

The previous build is the version's staged ``gemm.cl``; the new one is it with every GEMM loop
given an extra pass over ``--share`` of K whose sum enters C times 0.0f
(:func:`bench_noise.plant`: results unchanged; 0 plants nothing, a tie). The rounds
alternate the two ways (processes: a bench-gemm process per build, the order reversed every
pair, as a run's pairs; interleaved: one bench-gemm process with ``previous``, as the GEMM
sweep's pairs); each way measures the shapes together, 3 repeats of 20 ms per build
(``BATCH_REPEATS``, ``BATCH_MIN_TIME_MS`` of ``stages/gemm.py``). Per shape and way it prints
the per-pair ratios' median and spread (the standard deviation of their logarithms) and the
verdict that :func:`phonetrain.results.paired.until_decisive` reaches on the pairs in the
order measured (first look after 3, at most ``--pairs``).

    python benchmarks/bench_gemm_pairs.py --share 0.3 --pairs 12 [--hog 2]

``--hog N`` runs N busy loops for the whole measurement (a planted busy host).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_noise import plant  # noqa: E402
from phonetrain import runner as rt  # noqa: E402
from phonetrain.devices.toolchains import build_runner  # noqa: E402
from phonetrain.kernels import stage_kernels  # noqa: E402
from phonetrain.kernels.gemm import GemmShape, gemm_spec  # noqa: E402
from phonetrain.kernels.versions import load_version  # noqa: E402
from phonetrain.results.paired import until_decisive  # noqa: E402
from phonetrain.stages.gemm import (BATCH_MIN_TIME_MS, BATCH_REPEATS, PAIRED_FIRST,  # noqa: E402
                                    side_by_side)

SHAPES = [GemmShape("gemm_nn", 32, 128, 16), GemmShape("gemm_nt", 32, 256, 784),
          GemmShape("gemm_tn", 256, 784, 32), GemmShape("gemm_nn", 128, 128, 128),
          GemmShape("gemm_nn", 256, 256, 256)]


REPEATS: dict[tuple, list[tuple[list[float], list[float]]]] = {}
"""The interleaved processes' repeats per shape: [(previous repeat_ms, new repeat_ms)]."""


def estimators(key: tuple) -> str:
    """The spread (sd of log ratio) of the interleaved pairs under three per-process
    estimators: ratio of medians (the product's), of minimums, median of adjacent ratios."""
    out = []
    for f in (lambda o, n: statistics.median(n) / statistics.median(o),
              lambda o, n: min(n) / min(o),
              lambda o, n: statistics.median([b / a for a, b in zip(o, n)])):
        out.append(statistics.stdev([math.log(f(o, n)) for o, n in REPEATS[key]]))
    return " / ".join(f"{x:.3f}" for x in out)


def _busy() -> None:
    while True:
        pass


def sources(version: str, share: float, into: Path) -> tuple[Path, Path]:
    """(previous, new) ``gemm.cl``: the staged version, and it planted with ``share``."""
    old = stage_kernels(version, into / "old") / "gemm.cl"
    ws = into / "ws"
    (ws / "src" / "kernels" / "p").mkdir(parents=True)
    shutil.copy2(old, ws / "src" / "kernels" / "p" / "gemm.cl")
    if share > 0:
        assert plant(ws, "p", share) > 0, f"no GEMM loop of {version} planted"
    return old, ws / "src" / "kernels" / "p" / "gemm.cl"


def measure(r: rt.Runner, spec: dict, old: Path, new: Path, k: int, way: str,
            out: Path) -> dict[tuple, tuple[float, float]]:
    """One pair of every shape, ``way`` "processes" or "interleaved": {key: (old_ms, new_ms)}."""
    timing = {"repeats": BATCH_REPEATS, "min_time_ms": BATCH_MIN_TIME_MS}
    sp_new, sp_old = dict(spec, source=str(new), **timing), dict(spec, source=str(old), **timing)
    keys = [(c["kernel"], c["M"], c["N"], c["K"]) for c in spec["cases"]]
    if way == "interleaved":
        doc = r.bench_gemm(side_by_side(sp_new, sp_old, k, cases=[
            (c, c) for c in spec["cases"]]), out)
        for key, c in zip(keys, doc["cases"]):
            REPEATS.setdefault(key, []).append((c["previous"]["repeat_ms"], c["repeat_ms"]))
        return {key: (c["previous"]["median_ms"], c["median_ms"])
                for key, c in zip(keys, doc["cases"])}
    got = {}
    for side, sp in ([("old", sp_old), ("new", sp_new)] if k % 2 == 0 else
                     [("new", sp_new), ("old", sp_old)]):
        got[side] = r.bench_gemm(sp, out)["cases"]
    return {key: (a["median_ms"], b["median_ms"])
            for key, a, b in zip(keys, got["old"], got["new"])}


def verdict(pairs: list[tuple[float, float]], max_pairs: int) -> dict:
    it = iter(pairs)
    return until_decisive(lambda k: next(it), first=PAIRED_FIRST, max_pairs=max_pairs,
                          budget_s=1e9)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", default="baseline")
    ap.add_argument("--share", type=float, default=0.3, help="planted extra pass (0: a tie)")
    ap.add_argument("--pairs", type=int, default=12)
    ap.add_argument("--hog", type=int, default=0, help="busy loops during the measurement")
    ap.add_argument("--platform", default="Portable Computing Language")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="phonetrain-gemm-pairs-"))
    binary = build_runner(Path.home() / ".cache" / "phonetrain" / "bench-runner")
    old, new = sources(a.version, a.share, tmp)
    spec = gemm_spec(load_version(a.version), SHAPES, source=str(old))
    r = rt.Runner.local_binary(binary, tmp / "root", rt.DeviceSelector(platform=a.platform),
                               timeout_s=600)
    hogs = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(a.hog)]
    for h in hogs:
        h.start()
    load0, t0 = os.getloadavg()[0], time.monotonic()
    pairs: dict[str, dict[tuple, list]] = {"processes": {}, "interleaved": {}}
    wall = {"processes": 0.0, "interleaved": 0.0}
    try:
        for k in range(a.pairs):
            for way in (("processes", "interleaved") if k % 2 == 0 else
                        ("interleaved", "processes")):
                s = time.monotonic()
                for key, p in measure(r, spec, old, new, k, way, tmp / "out").items():
                    pairs[way].setdefault(key, []).append(p)
                wall[way] += time.monotonic() - s
            print(f"pair {k + 1}/{a.pairs} ({time.monotonic() - t0:.0f} s)", file=sys.stderr)
    finally:
        for h in hogs:
            h.terminate()
    print(f"\n{a.version}, planted {a.share:g} of K, {a.pairs} pairs per way, hog {a.hog}, "
          f"load {load0:.1f}-{os.getloadavg()[0]:.1f}, "
          f"{time.monotonic() - t0:.0f} s (processes {wall['processes']:.0f} s, "
          f"interleaved {wall['interleaved']:.0f} s)\n")
    print("| shape | way | median ratio | spread (sd of log ratio) | verdict | pairs | interval "
          "| interleaved spread: medians / minimums / adjacent ratios |")
    print("|---|---|---:|---:|---|---:|---|---|")
    for g in SHAPES:
        key = (g.kernel, g.M, g.N, g.K)
        for way in ("processes", "interleaved"):
            ps = pairs[way][key]
            logs = [math.log(n / o) for o, n in ps]
            v = verdict(ps, a.pairs)
            print(f"| {g.kernel} {g.M}x{g.N}x{g.K} | {way} | {math.exp(statistics.median(logs)):.3f} "
                  f"| {statistics.stdev(logs):.3f} | {v['verdict']} | {v['pairs']} "
                  f"| {v['low']:.2f}-{v['high']:.2f} "
                  f"| {estimators(key) if way == 'interleaved' else ''} |")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
