#!/usr/bin/env python3
"""How often the side-by-side verdict is wrong, and how many pairs it needs: the stopping rule
of :func:`phonetrain.results.paired.until_decisive` replayed on simulated pairs.

A kernel edit's rerun looks at its pairs after every pair until the interval is decisive, so
a planted tie (previous and new drawn from one distribution) can still end ``faster`` or
``slower``; the per-look confidence trades that false rate against the pairs a real change
needs. For each noise model, planted ratio and per-look confidence this prints the share of
reruns ending in each verdict and the median pairs, for the bounds of a training run (first
look after 2 pairs, at most 12: ``stages/paired.py``) and of a GEMM shape (3, at most 16:
``stages/gemm.py``). No time budget: the bound in pairs is what stops an undecided rerun.

Noise models (each process's figure, ms):
- ``lognormal:S``: exp(N(0, S)) -- a GEMM shape's processes (S 0.1) or a run's (S 0.06);
- ``pooled:DIR:SUBJECT``: drawn with replacement from the figures of every ``paired.json``
  under DIR whose run folder name starts with SUBJECT (e.g. a launch-bound run's processes,
  whose medians fall in two modes);
- ``bimodal``: half the processes 0.08 ms, half 0.14 ms, each times exp(N(0, 0.1)).

    python benchmarks/bench_sequential.py --noise lognormal:0.1 bimodal \\
        pooled:/work/meas/paired_q2:mlp_16_16 --ratios 1 1.1 1.3 --confidences 0.95 0.99
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from phonetrain.results.paired import until_decisive  # noqa: E402

BOUNDS = {"run": (2, 12), "gemm": (3, 16)}


def noise_model(spec: str, rng: random.Random) -> Callable[[], float]:
    """One process's figure (ms) for a noise ``spec`` (see the module doc). Raises
    SystemExit for an unknown spec or a pooled folder without figures."""
    kind, _, rest = spec.partition(":")
    if kind == "lognormal":
        s = float(rest)
        return lambda: rng.lognormvariate(0, s)
    if kind == "bimodal":
        return lambda: rng.choice((0.08, 0.14)) * rng.lognormvariate(0, 0.1)
    if kind == "pooled":
        folder, _, subject = rest.rpartition(":")
        figs = [x for f in Path(folder).glob("**/paired.json")
                if f.parent.name.startswith(subject)
                for pair in json.loads(f.read_text()).get("pairs_ms", []) for x in pair if x]
        if not figs:
            raise SystemExit(f"{spec}: no paired.json with pairs_ms under {folder} for {subject}")
        return lambda: rng.choice(figs)
    raise SystemExit(f"unknown noise model {spec!r}: lognormal:S, bimodal or pooled:DIR:SUBJECT")


def replay(draw: Callable[[], float], ratio: float, bounds: tuple[int, int],
           confidence: float, reruns: int) -> tuple[dict[str, float], float]:
    """``reruns`` simulated reruns of one row: (share of each verdict, median pairs)."""
    first, most = bounds
    counts: dict[str, int] = {}
    pairs = []
    for _ in range(reruns):
        doc = until_decisive(lambda k: (draw(), ratio * draw()), first=first, max_pairs=most,
                             budget_s=float("inf"), confidence=confidence)
        counts[doc["verdict"]] = counts.get(doc["verdict"], 0) + 1
        pairs.append(doc["pairs"])
    return {v: n / reruns for v, n in counts.items()}, statistics.median(pairs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--noise", nargs="+", default=["lognormal:0.1", "bimodal"])
    ap.add_argument("--ratios", nargs="+", type=float, default=[1.0, 1.1, 1.3])
    ap.add_argument("--confidences", nargs="+", type=float, default=[0.95, 0.99])
    ap.add_argument("--bounds", nargs="+", choices=sorted(BOUNDS), default=sorted(BOUNDS))
    ap.add_argument("--reruns", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    print("| noise | bounds (first, most) | planted ratio | per-look confidence | faster | "
          "slower | no change | cannot tell | median pairs |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for spec in a.noise:
        for b in a.bounds:
            for ratio in a.ratios:
                for conf in a.confidences:
                    rng = random.Random(a.seed)
                    share, med = replay(noise_model(spec, rng), ratio, BOUNDS[b], conf, a.reruns)
                    cells = " | ".join(f"{share.get(v, 0.0):.1%}" for v in
                                       ("faster", "slower", "no change", "cannot tell"))
                    print(f"| {spec} | {b} {BOUNDS[b]} | {ratio:g} | {conf:g} | {cells} | "
                          f"{med:g} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
