#!/usr/bin/env python3
"""Runner binaries and kernel variants side by side on one lowered training step: an A/B of a
runner or kernel change.

Each model is lowered once (``--backend`` OpenCL or Vulkan, ``--kernel`` version,
``--placement``, batch 32, synthetic batches, SGD lr 0.05, 20 warm-up + ``--iterations`` timed
iterations); every arm then runs that plan, with and/or without profiling events (``runner run
--no-profiling``; ``--profiling``), in ``--rounds`` alternating rounds (forward order in even
rounds, reversed in odd ones) so every arm sees the same drift of the machine. An arm is a
``NAME=RUNNER`` binary, or ``NAME=RUNNER:KEY=VALUE,...``: the same plan with the kernel
version's defines (``LIN_SX=2``) and local sizes (``local.linear_fwd=8x8``) changed, its
programs' build options and those kernels' launch geometry recomputed (``phonetrain.kernels
.geometry``), as a version variant of ``version.yaml`` would give. Every run is verified per
step against the numpy reference (``phonetrain.reference.verify_run_dir``). Prints one
markdown row per (model, arm, profiling): the median ms per step and the p10-p90 of each
round, and whether every run verified; ``--json FILE`` keeps every run as it completes
(``"finished": false`` until the end). Build the binaries first, e.g. for a tree before a
change::

    git worktree add /tmp/before OLD && PYTHONPATH=/tmp/before/src python -c \\
      "from pathlib import Path; from phonetrain.devices.toolchains import build_runner; \\
       print(build_runner(Path('/tmp/rb_before')))"
    python benchmarks/bench_runner_ab.py --platform NVIDIA --models lenet5 \\
        before=/tmp/rb_before/runner-.../runner after=/tmp/rb_after/runner-.../runner
"""

from __future__ import annotations

import argparse
import copy
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from phonetrain import reference  # noqa: E402
from phonetrain.data import write_batches  # noqa: E402
from phonetrain.io import write_json  # noqa: E402
from phonetrain.kernels import bind_args, geometry, load_version, stage_kernels  # noqa: E402
from phonetrain.kernels.spirv import spec_options, stage_spirv  # noqa: E402
from phonetrain.layout import device_spirv, plan_dir_rel  # noqa: E402
from phonetrain.lowering import LowerSpec, write_plan_dir  # noqa: E402
from phonetrain.models import get_model  # noqa: E402
from phonetrain.plan import Plan  # noqa: E402
from phonetrain.results.provenance import git_rev  # noqa: E402
from phonetrain.runner import DeviceSelector, Runner  # noqa: E402

BATCH = 32
NUM_BATCHES = 8
PLACEMENTS = {"resident-copy": ("resident", "copy"), "staged-copy": ("staged", "copy"),
              "staged-map": ("staged", "map")}


def lower(model: str, a: argparse.Namespace, root: Path, splitk: int = 0,
          suffix: str = "") -> tuple[str, Path]:
    """The plan of ``model`` under ``root`` (batches written beside it), its fused convolution
    updates split to reach ``splitk`` work-groups (0: never; ``LowerSpec.splitk_groups``);
    returns its path relative to ``root`` and its directory."""
    m = get_model(model)
    write_batches("synthetic", BATCH, NUM_BATCHES, root, seed=0, input_shape=m.input_shape,
                  classes=m.classes)
    placement, transfer = PLACEMENTS[a.placement]
    pid = f"ab.{model}{suffix}"
    spec = LowerSpec(model=model, batch_size=BATCH, backend=a.backend, placement=placement,
                     transfer=transfer, kernel=a.kernel, dataset="synthetic",
                     num_batches=NUM_BATCHES, warmup=a.warmup, iterations=a.iterations, seed=0,
                     lr=0.05, plan_id=pid, splitk_groups=splitk)
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


def parse_variant(text: str) -> dict[str, object]:
    """``KEY=VALUE,...`` -> ``{"defines": {...}, "local": {kernel: [x, y]}, "splitk": N}``
    (``splitk=N``: the plan lowered with ``LowerSpec.splitk_groups`` N); ``ValueError`` naming
    the item on a malformed one."""
    out: dict = {"defines": {}, "local": {}, "splitk": 0}
    for item in filter(None, text.split(",")):
        key, sep, val = item.partition("=")
        if not sep or not key or not val:
            raise ValueError(f"variant item {item!r}: give KEY=VALUE, local.KERNEL=AxB or "
                             "splitk=N")
        if key == "splitk":
            out["splitk"] = int(val)
        elif key.startswith("local."):
            out["local"][key[6:]] = [int(x) for x in val.split("x")]
        else:
            out["defines"][key] = int(val) if val.lstrip("-").isdigit() else val
    return out


def variant_plan(pdir: Path, kernel: str, variant: dict, dest: Path) -> None:
    """A copy of the plan folder ``pdir`` at ``dest`` with ``variant`` applied to its plan
    (every program's build options -- a Vulkan plan's: the defines that are specialization
    constants, :func:`phonetrain.kernels.spirv.spec_options` --; the changed kernels'
    global/local sizes)."""
    kv = copy.deepcopy(load_version(kernel))
    kv.defines.update(variant["defines"])
    kv.local_sizes.update(variant["local"])
    plan = Plan.load(pdir / "plan.json")
    for prog in plan.programs:
        prog.options = spec_options(kv) if plan.backend == "vulkan" else kv.options
    for st in plan.steps:
        if st.op == "kernel" and st.name in variant["local"]:
            st.global_size, st.local_size = geometry(st.name, bind_args(st.name, st.args), kv)
    shutil.copytree(pdir, dest, dirs_exist_ok=True)
    plan.save(dest / "plan.json")


def parse_arms(ap: argparse.ArgumentParser, arms: list[str]) -> list[tuple[str, Path, dict]]:
    """``NAME=RUNNER[:VARIANT]`` -> (name, binary, variant or {})."""
    out = []
    for arg in arms:
        name, sep, rest = arg.partition("=")
        path, _, var = rest.partition(":")
        if not sep or not Path(path).is_file():
            ap.error(f"{arg!r}: give NAME=RUNNER[:KEY=VALUE,...] with RUNNER an existing "
                     "runner binary")
        try:
            out.append((name, Path(path), parse_variant(var) if var else {}))
        except ValueError as e:
            ap.error(f"{arg!r}: {e}")
    return out


def save_json(path: str | None, doc: dict) -> None:
    """``doc`` to ``path`` atomically (:func:`phonetrain.io.write_json`); nothing without
    ``--json``."""
    if path:
        write_json(doc, path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runners", nargs="+", metavar="NAME=RUNNER[:KEY=VALUE,...]")
    ap.add_argument("--models", default="mlp_784_256_128_16,lenet5")
    ap.add_argument("--platform", default="NVIDIA", help="OpenCL platform name substring")
    ap.add_argument("--backend", default="opencl", choices=("opencl", "vulkan"))
    ap.add_argument("--vk-device", default=None, help="Vulkan device name substring")
    ap.add_argument("--spirv", default=None, help="folder of the kernel version's compiled "
                    "SPIR-V (<kernel>.spv), instead of compiling with glslc here")
    ap.add_argument("--kernel", default="fused")
    ap.add_argument("--placement", default="resident-copy", choices=sorted(PLACEMENTS))
    ap.add_argument("--profiling", default="both", choices=("off", "on", "both"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--json", default=None, help="keep every run here as it completes")
    ap.add_argument("--source-commit", metavar="REV", help="the commit a copy of the tree "
                    "without its .git was made from (recorded beside its sources hash)")
    a = ap.parse_args()
    arms = parse_arms(ap, a.runners)
    profs = {"off": (False,), "on": (True,), "both": (False, True)}[a.profiling]
    root = Path(tempfile.mkdtemp(prefix="runner-ab-"))
    if a.backend == "vulkan":
        if a.spirv:
            shutil.copytree(a.spirv, root / device_spirv(a.kernel))
        else:
            stage_spirv(a.kernel, root)
        sel = DeviceSelector(vk_device=a.vk_device)
    else:
        stage_kernels(a.kernel, root)
        sel = DeviceSelector(platform=a.platform)
    rows: dict[tuple[str, str, bool], list[tuple[str, bool]]] = {}
    doc = {"argv": sys.argv[1:], "phonetrain": git_rev(), "copied_from": a.source_commit,
           "backend": a.backend, "kernel": a.kernel,
           "placement": a.placement, "finished": False, "runs": []}
    for model in a.models.split(","):
        plan_rel, pdir = lower(model, a, root)
        plans = {}
        for name, _, var in arms:
            plans[name] = (plan_rel, pdir)
            if var.get("splitk"):
                plans[name] = lower(model, a, root, var["splitk"], f".{name}.lowered")
            if var:
                src = plans[name][1]
                vdir = pdir.parent / f"{pdir.name}.{name}"
                variant_plan(src, a.kernel, var, vdir)
                plans[name] = (f"{Path(plan_rel).parent.parent}/{vdir.name}/plan.json", vdir)
        for r in range(a.rounds):
            for name, binary, _ in (arms if r % 2 == 0 else arms[::-1]):
                for prof in profs:
                    out = root / "out" / f"{model}.{name}.{r}.{int(prof)}"
                    t0 = time.monotonic()
                    ms, ok = one_run(binary, root, sel, *plans[name], out, prof)
                    wall_s = time.monotonic() - t0
                    rows.setdefault((model, name, prof), []).append((spread(ms), ok))
                    doc["runs"].append({"model": model, "arm": name, "round": r,
                                        "profiling": prof, "median_ms": statistics.median(ms),
                                        "spread": spread(ms), "verified": ok, "ms": ms})
                    save_json(a.json, doc)
                    print(f"{model} {name} profiling={prof} round {r}: {spread(ms)} "
                          f"verified={ok} (run + verify {wall_s:.1f} s)", file=sys.stderr,
                          flush=True)
    doc["finished"] = True
    save_json(a.json, doc)
    where = f"platform {a.platform}" if a.backend == "opencl" else "Vulkan"
    print(f"\n{a.backend} {a.kernel}, {a.placement}, {where}, batch {BATCH}, "
          f"{a.iterations} timed iterations after {a.warmup}\n")
    print("| model | arm | profiling events | median ms [p10-p90] per round | verified |")
    print("|---|---|---|---|---|")
    for (model, name, prof), rs in rows.items():
        print(f"| {model} | {name} | {'on' if prof else 'off'} | "
              f"{'; '.join(s for s, _ in rs)} | {all(ok for _, ok in rs)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
