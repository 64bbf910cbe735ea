#!/usr/bin/env python3
"""Runner binaries side by side on one lowered training step: an A/B of a runner change.

Each model is lowered once (OpenCL backend, ``--kernel`` version, ``--placement``, batch 32,
synthetic batches, SGD lr 0.05, 20 warm-up + ``--iterations`` timed iterations); every
``NAME=RUNNER`` given then runs that same plan directory, with and without profiling events
(``runner run --no-profiling``), in ``--rounds`` alternating rounds (forward order in even
rounds, reversed in odd ones) so every binary sees the same drift of the machine. Every run is
verified per step against the numpy reference (``phonetrain.reference.verify_run_dir``).
Prints one markdown row per (model, runner, profiling): the median ms per step and the p10-p90
of each round, and whether every run verified. Build the binaries first, e.g. for a tree
before a change::

    git worktree add /tmp/before OLD && PYTHONPATH=/tmp/before/src python -c \\
      "from pathlib import Path; from phonetrain.devices.toolchains import build_runner; \\
       print(build_runner(Path('/tmp/rb_before')))"
    python benchmarks/bench_runner_ab.py --platform NVIDIA --models lenet5 \\
        before=/tmp/rb_before/runner-.../runner after=/tmp/rb_after/runner-.../runner
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from phonetrain import reference  # noqa: E402
from phonetrain.data import write_batches  # noqa: E402
from phonetrain.kernels import stage_kernels  # noqa: E402
from phonetrain.layout import plan_dir_rel  # noqa: E402
from phonetrain.lowering import LowerSpec, write_plan_dir  # noqa: E402
from phonetrain.models import get_model  # noqa: E402
from phonetrain.plan import Plan  # noqa: E402
from phonetrain.runner import DeviceSelector, Runner  # noqa: E402

BATCH = 32
NUM_BATCHES = 8
PLACEMENTS = {"resident-copy": ("resident", "copy"), "staged-copy": ("staged", "copy"),
              "staged-map": ("staged", "map")}


def lower(model: str, a: argparse.Namespace, root: Path) -> tuple[str, Path]:
    """The plan of ``model`` under ``root`` (batches written beside it); returns its path
    relative to ``root`` and its directory."""
    m = get_model(model)
    write_batches("synthetic", BATCH, NUM_BATCHES, root, seed=0, input_shape=m.input_shape,
                  classes=m.classes)
    placement, transfer = PLACEMENTS[a.placement]
    pid = f"ab.{model}"
    spec = LowerSpec(model=model, batch_size=BATCH, backend="opencl", placement=placement,
                     transfer=transfer, kernel=a.kernel, dataset="synthetic",
                     num_batches=NUM_BATCHES, warmup=a.warmup, iterations=a.iterations, seed=0,
                     lr=0.05, plan_id=pid)
    pdir = write_plan_dir(spec, root)
    return f"{plan_dir_rel(pid)}/plan.json", pdir


def one_run(binary: Path, root: Path, sel, plan_rel: str, pdir: Path, out: Path,
            profiling: bool) -> tuple[list[float], bool]:
    """The measured iterations' wall ms of one run and whether it verified per step."""
    run = Runner.local_binary(binary, root, sel, timeout_s=300).run(plan_rel, out,
                                                                    profiling=profiling)
    v = reference.verify_run_dir(Plan.load(pdir / "plan.json"), root, out)
    return [i["wall_ms"] for i in run["iters"] if not i["warmup"]], bool(v.get("ok"))


def spread(ms: list[float]) -> str:
    """``median [p10-p90]`` in ms."""
    q = statistics.quantiles(ms, n=10)
    return f"{statistics.median(ms):.3f} [{q[0]:.3f}-{q[-1]:.3f}]"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runners", nargs="+", metavar="NAME=RUNNER")
    ap.add_argument("--models", default="mlp_784_256_128_16,lenet5")
    ap.add_argument("--platform", default="NVIDIA", help="OpenCL platform name substring")
    ap.add_argument("--kernel", default="fused")
    ap.add_argument("--placement", default="resident-copy", choices=sorted(PLACEMENTS))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    a = ap.parse_args()
    bins = []
    for arg in a.runners:
        name, sep, path = arg.partition("=")
        if not sep or not Path(path).is_file():
            ap.error(f"{arg!r}: give NAME=RUNNER with RUNNER an existing runner binary")
        bins.append((name, Path(path)))
    root = Path(tempfile.mkdtemp(prefix="runner-ab-"))
    stage_kernels(a.kernel, root)
    sel = DeviceSelector(platform=a.platform)
    rows: dict[tuple[str, str, bool], list[tuple[str, bool]]] = {}
    for model in a.models.split(","):
        plan_rel, pdir = lower(model, a, root)
        for r in range(a.rounds):
            for name, binary in (bins if r % 2 == 0 else bins[::-1]):
                for prof in (False, True):
                    out = root / "out" / f"{model}.{name}.{r}.{int(prof)}"
                    ms, ok = one_run(binary, root, sel, plan_rel, pdir, out, prof)
                    rows.setdefault((model, name, prof), []).append((spread(ms), ok))
                    print(f"{model} {name} profiling={prof} round {r}: {spread(ms)} "
                          f"verified={ok}", file=sys.stderr, flush=True)
    print(f"\n{a.kernel}, {a.placement}, platform {a.platform}, batch {BATCH}, "
          f"{a.iterations} timed iterations after {a.warmup}\n")
    print("| model | runner | profiling events | median ms [p10-p90] per round | verified |")
    print("|---|---|---|---|---|")
    for (model, name, prof), rs in rows.items():
        print(f"| {model} | {name} | {'on' if prof else 'off'} | "
              f"{'; '.join(s for s, _ in rs)} | {all(ok for _, ok in rs)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
