#!/usr/bin/env python3
"""GEMM GFLOPS per kernel version (and CLBlast, and the runner's CPU backend) on one OpenCL
device, at the paper MLP's shapes (784-256-128-16, batch 32) and square M=N=K sizes; plus the
device's measured peaks (clpeak method). Prints markdown tables.

Needs only numpy, pandas, PyYAML and the runner built by ``cc`` (built here when --runner is
not given; no Hydra, no Snakemake)::

    python benchmarks/bench_gemm.py                                   # this host's PoCL
    python benchmarks/bench_gemm.py --platform NVIDIA --device-type gpu --sizes 1024,2048,4096

``--tune`` runs each version's tuning space (its version.yaml defaults, then the candidates
under ``tuning:`` in src/kernels/<version>/version.yaml) per shape and reports its best correct
configuration (what the build stage's tune job would keep); without it the version.yaml
defaults are used. A version whose estimated time per launch exceeds --max-launch-s
(extrapolated from its previous square size) is skipped.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from phonetrain.devices.toolchains import build_runner  # noqa: E402
from phonetrain.kernels import gemm, load_version, tuning  # noqa: E402
from phonetrain.runner import OMP_WAIT_POLICY, DeviceSelector, RunnerError  # noqa: E402
from phonetrain.stages.gemm import bench_here, peaks_here  # noqa: E402

MLP = [(784, 256), (256, 128), (128, 16)]   # paper MLP layers (in, out)
BATCH = 32


def mlp_shapes() -> list[gemm.GemmShape]:
    """Forward gemm_nt(B, out, in), backward gemm_tn(out, in, B) and gemm_nn(B, in, out)
    (src/kernels/README.md, Linear lowering)."""
    out = []
    for i, o in MLP:
        out += [gemm.GemmShape("gemm_nt", BATCH, o, i), gemm.GemmShape("gemm_tn", o, i, BATCH),
                gemm.GemmShape("gemm_nn", BATCH, i, o)]
    return out


def measure(args, runner: Path, name: str, shape: gemm.GemmShape) -> tuple[float, str]:
    """Best GFLOPS of one version on one shape, and the configuration that gave it."""
    sel = args.selector
    if name == "cpu":
        df = bench_here(runner, None, [shape], min_time_ms=args.min_time_ms,
                             repeats=args.repeats, threads=args.threads)
        return _pick(df, "threads=%d" % args.threads)
    kv = load_version(name)
    cands = kv.candidates if args.tune else kv.candidates[:1]
    best, cfg = math.nan, ""
    for cand in cands:
        try:
            df = bench_here(runner, tuning.candidate_version(kv, cand), [shape],
                                 selector=sel, min_time_ms=args.min_time_ms,
                                 repeats=args.repeats)
        except RunnerError as e:
            print(f"  {name} {cand}: {str(e).splitlines()[0]}", file=sys.stderr)
            continue
        if df.attrs.get("skipped"):
            return math.nan, "skipped: " + df.attrs["skipped"]
        g, _ = _pick(df, "")
        if args.per_candidate:
            _print_candidate(name, shape, cand, df.iloc[0])
        if not (g <= best):   # also replaces NaN
            best = g
            cfg = " ".join(f"{k}={v}" for k, v in cand["defines"].items())
            if cand.get("local"):
                cfg += f" local={cand['local'][0]}x{cand['local'][1]}"
    return best, cfg


def _print_candidate(name: str, shape: gemm.GemmShape, cand: dict, row) -> None:
    """One markdown row per tried configuration on stderr: GFLOPS and the median's interval."""
    cfg = " ".join(f"{k}={v}" for k, v in cand["defines"].items())
    print(f"| {shape.kernel} {shape.M}x{shape.N}x{shape.K} | {name} | {cfg} | {row.status} | "
          f"{row.gflops:.1f} | {row.median_ms:.3f} | {row.low_ms:.3f}-{row.high_ms:.3f} |",
          file=sys.stderr, flush=True)


def _pick(df, cfg: str) -> tuple[float, str]:
    row = df.iloc[0]
    if row.status != "ok":
        return math.nan, f"{row.status}: {row.error}"
    return float(row.gflops), cfg


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runner", help="runner binary (default: build one with --cc)")
    ap.add_argument("--cc", default="cc")
    ap.add_argument("--platform", help="OpenCL platform name substring")
    ap.add_argument("--device", help="OpenCL device name substring")
    ap.add_argument("--device-type", help="gpu | cpu | accelerator | all")
    ap.add_argument("--versions", default="baseline,tiled,regblock,image,clblast,cpu")
    ap.add_argument("--sizes", default="1024,2048,4096", help="square M=N=K sizes")
    ap.add_argument("--no-mlp", action="store_true", help="skip the paper MLP's shapes")
    ap.add_argument("--tune", action="store_true", help="best of each version's search space")
    ap.add_argument("--min-time-ms", type=float, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="CPU backend threads (0 = all)")
    ap.add_argument("--max-launch-s", type=float, default=10)
    ap.add_argument("--no-peaks", action="store_true")
    ap.add_argument("--per-candidate", action="store_true",
                    help="also print every tried configuration's GFLOPS (stderr, markdown rows)")
    args = ap.parse_args()
    args.selector = DeviceSelector(args.platform, args.device, args.device_type)
    runner = Path(args.runner) if args.runner else build_runner(
        Path(tempfile.mkdtemp(prefix="phonetrain-bench-")), cc=args.cc)
    # the runner's OpenMP wait policy is the driver's, as in the workflow
    print(f"OpenMP wait policy: {OMP_WAIT_POLICY} (phonetrain.runner)\n")
    versions = args.versions.split(",")
    shapes = ([] if args.no_mlp else mlp_shapes()) + gemm.square_shapes(
        int(s) for s in args.sizes.split(",") if s)
    info = peaks_here(runner, args.selector, min_time_ms=50) if not args.no_peaks else None
    if info is not None:
        print(f"device: {info.device.iloc[0]} ({info.platform.iloc[0]})\n")
        print("| peak | value |\n|---|---|")
        for r in info.itertuples():
            val = f"{r.gflops:.1f} GFLOPS" if r.kind == "compute" else f"{r.gbps:.1f} GB/s"
            print(f"| {r.kind} {r.name} | {val} |")
        print()
    # the reference column: the first version whose GEMM is a library (CLBlast)
    library = next((n for n in versions if n != "cpu" and load_version(n).gemm_library), "")
    print("| shape | " + " | ".join(versions) +
          f" | best/baseline | best/{library or 'library'} | best config |")
    print("|---|" + "---|" * (len(versions) + 3))
    last: dict[str, tuple[float, float]] = {}   # version -> (flops, gflops) of the last shape
    for shape in shapes:
        cells, results = [], {}
        for name in versions:
            prev = last.get(name)
            if prev and prev[1] > 0 and shape.flops / (prev[1] * 1e9) > args.max_launch_s:
                cells.append(f"skipped (~{shape.flops / (prev[1] * 1e9):.0f} s/launch)")
                continue
            g, cfg = measure(args, runner, name, shape)
            results[name] = (g, cfg)
            if g == g and shape.M == shape.N == shape.K:   # extrapolate along the squares only
                last[name] = (shape.flops, g)
            cells.append(f"{g:.1f}" if g == g else (cfg or "n/a")[:60])
        own = {n: r for n, r in results.items() if n != "cpu" and r[0] == r[0]
               and not load_version(n).gemm_library}
        best_name = max(own, key=lambda n: own[n][0]) if own else None
        ratio = lambda ref: (f"{own[best_name][0] / results[ref][0]:.2f}x"  # noqa: E731
                             if best_name and ref in results and results[ref][0] > 0 else "-")
        label = f"{shape.kernel} {shape.M}x{shape.N}x{shape.K}"
        best_cfg = f"{best_name} {own[best_name][1]}" if best_name else "-"
        print(f"| {label} | " + " | ".join(cells) +
              f" | {ratio('baseline')} | {ratio(library)} | {best_cfg} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
