#!/usr/bin/env python3
"""Side-by-side run pairs: two runner processes per pair, or one process with both plans'
iterations alternating (``runner run --previous-plan``)? The spread of the pairs' ratios
and the verdict, for a planted tie (the same plan on both sides), both ways in one run on this
host's OpenCL device (PoCL by default).

Each model is lowered once (opencl, resident/copy, batch 32, the study's warm-up and
iteration counts) and measured as the train job measures a side (adaptively with the
``measure`` defaults: ``ci_target``, ``max_iterations``, ``max_seconds``; no events, no
checkpoints). The rounds alternate the two ways (processes: a runner process per side, the
order reversed every pair, as a run's pairs were; one: one process holding both, as they are
now). Per model and way it prints the median of the pairs' ratios new / previous, their spread
(the standard deviation of their logarithms), the largest ratio either way, and the verdict
:func:`phonetrain.results.paired.until_decisive` reaches on the pairs in the order measured
(first look after 2, at most ``--pairs``); a tie should read *no change* or *cannot tell*.
Each way's CPU seconds (the runner processes' user+sys) are printed too.

    python benchmarks/bench_run_pairs.py --pairs 6 [--hog 2] [--model mlp_16_16 ...]

``--hog N`` runs N busy loops for the whole measurement (a planted busy host).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from phonetrain import runner as rt  # noqa: E402
from phonetrain.config.schema import MeasureConfig  # noqa: E402
from phonetrain.devices.toolchains import build_runner  # noqa: E402
from phonetrain.lowering import LowerSpec, write_bundle  # noqa: E402
from phonetrain.plan import DEFAULT_ITERATIONS, DEFAULT_WARMUP  # noqa: E402
from phonetrain.results.paired import until_decisive  # noqa: E402
from phonetrain.stages.paired import side_medians  # noqa: E402

MODELS = ["mlp_16_16", "mlp_784_256_128_16"]


def _busy() -> None:
    while True:
        pass


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def measure(r: rt.Runner, plan: Path, k: int, way: str, out: Path) -> tuple[float, float]:
    """One pair of ``plan`` against itself, ``way`` "processes" or "one": (previous_ms, new_ms),
    each side's median step time over the rounds both ran (``side_medians``)."""
    ms = MeasureConfig()
    kw = {"threads": 0, "profiling": False, "checkpoints": False,
          "adaptive": rt.Adaptive(ci_target=ms.ci_target, max_iterations=ms.max_iterations,
                                  max_seconds=ms.max_seconds,
                                  resamples=ms.bootstrap_resamples)}
    old, new = out / f"previous_{k}", out / f"process_{k}"
    if way == "one":
        r.run(plan, new, previous=(plan, old), **kw)
    else:
        for d in ([old, new] if k % 2 == 0 else [new, old]):
            r.run(plan, d, **kw)
    return side_medians(old, new)


def verdict(pairs: list[tuple[float, float]], max_pairs: int) -> dict:
    it = iter(pairs)
    return until_decisive(lambda k: next(it), first=2, max_pairs=max_pairs, budget_s=1e9)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--hog", type=int, default=0, help="busy loops during the measurement")
    ap.add_argument("--model", action="append", help=f"models (default: {' '.join(MODELS)})")
    ap.add_argument("--platform", default="Portable Computing Language")
    a = ap.parse_args()
    models = a.model or MODELS
    tmp = Path(tempfile.mkdtemp(prefix="phonetrain-run-pairs-"))
    binary = build_runner(Path.home() / ".cache" / "phonetrain" / "bench-runner")
    root = tmp / "root"
    plans = {m: write_bundle(LowerSpec(model=m, batch_size=32, backend="opencl",
                                       placement="resident", transfer="copy",
                                       warmup=DEFAULT_WARMUP, iterations=DEFAULT_ITERATIONS,
                                       num_batches=4, dumps="none"), root) for m in models}
    r = rt.Runner.local_binary(binary, root, rt.DeviceSelector(platform=a.platform),
                               timeout_s=600)
    hogs = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(a.hog)]
    for h in hogs:
        h.start()
    load0, t0 = os.getloadavg()[0], time.monotonic()
    pairs: dict[str, dict[str, list]] = {"processes": {}, "one": {}}
    cpu = {"processes": 0.0, "one": 0.0}
    try:
        for k in range(a.pairs):
            for way in (("processes", "one") if k % 2 == 0 else ("one", "processes")):
                for m, plan in plans.items():
                    c = _children_cpu_s()
                    pairs[way].setdefault(m, []).append(measure(r, plan, k, way, tmp / way / m))
                    cpu[way] += _children_cpu_s() - c
            print(f"pair {k + 1}/{a.pairs} ({time.monotonic() - t0:.0f} s)", file=sys.stderr)
    finally:
        for h in hogs:
            h.terminate()
    print(f"\nplanted tie (the same plan on both sides), {a.pairs} pairs per way, hog {a.hog}, "
          f"load {load0:.1f}-{os.getloadavg()[0]:.1f}, {time.monotonic() - t0:.0f} s; runner "
          f"CPU s (user+sys): processes {cpu['processes']:.1f}, one {cpu['one']:.1f}\n")
    print("| model | way | median ratio | spread (sd of log ratio) | largest ratio either way "
          "| verdict | pairs | interval |")
    print("|---|---|---:|---:|---:|---|---:|---|")
    for m in models:
        for way in ("processes", "one"):
            ps = pairs[way][m]
            logs = [math.log(n / o) for o, n in ps]
            v = verdict(ps, a.pairs)
            print(f"| {m} | {way} | {math.exp(statistics.median(logs)):.3f} "
                  f"| {statistics.stdev(logs):.3f} | {math.exp(max(abs(x) for x in logs)):.2f}x "
                  f"| {v['verdict']} | {v['pairs']} | {v['low']:.2f}-{v['high']:.2f} |")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
