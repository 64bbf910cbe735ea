"""A small real study for the aggregate/report tests: the real runner on PoCL through the
workflow's own stage functions (phonetrain.experiment), no Snakemake.

Runs of mlp_784_256_128_16 (1 warm-up + 3 measured iterations) on this host: cpu, opencl
(resident/copy), opencl_staged_map (staged/map), plus opencl_staged (staged/copy) verified
with an impossible tolerance so it is really ``wrong``, and lenet5 on cpu whose params are
written but which never runs (the ``--keep-going`` case: ``failed``). Plus the device's
bandwidth sweep (up to 64 KiB) and the baseline kernel build.
"""

from __future__ import annotations

import json
from pathlib import Path

from phonetrain import experiment as X
from phonetrain.config import compose_sweep

MODEL = "mlp_784_256_128_16"
WRONG = f"{MODEL}.opencl_staged.baseline"
FAILED = "lenet5.cpu.none"
OK = (f"{MODEL}.cpu.none", f"{MODEL}.opencl.baseline", f"{MODEL}.opencl_staged_map.baseline")


def make_real_study(root: Path) -> dict[str, list[Path]]:
    """Run the study under ``root/results``; return the aggregate's inputs."""
    R = root / "results"
    base = [f"results_dir={R}", "measure.warmup=1", "measure.iterations=3",
            "measure.progress=false", "measure.bandwidth_max_bytes=65536",
            "sweep.devices=[host]", "sweep.kernels=[baseline]"]
    main = compose_sweep(base + [f"sweep.models=[{MODEL}]",
                                 "sweep.backends=[cpu,opencl,opencl_staged_map]"])
    strict = compose_sweep(base + [f"sweep.models=[{MODEL}]", "sweep.backends=[opencl_staged]",
                                   "measure.verify_atol=1e-12"])
    never = compose_sweep(base + ["sweep.models=[lenet5]", "sweep.backends=[cpu]"])
    bdir = R / "build" / "host"
    bdir.mkdir(parents=True, exist_ok=True)
    maps = X.write_params(main)
    X.build_runner(bdir / "params.json", bdir / "runner")
    kdir = bdir / "kernels" / "baseline"
    X.build_kernels(kdir / "params.json", kdir / "build.json", R)
    X.bandwidth(bdir / "params.json", R / "bandwidth" / "host" / "bandwidth.csv", R)
    run_dirs = []
    for sweep in (main, strict, never):
        maps = X.write_params(sweep)
        for exp in sweep.experiments:
            rdir = X.run_dir(R, exp)
            run_dirs.append(rdir)
            if sweep is never:
                continue
            ddir = maps["plan_data"][exp.id]
            X.write_data(R / "config" / f"{ddir}.json", R)
            X.lower(R / "config" / "plans" / f"{exp.id}.json", R)
            X.deploy(rdir / "params.json", R / "deploy" / exp.device / f"{exp.id}.json", R)
            X.train(rdir / "params.json", R, progress=False)
    assert json.loads((R / "runs" / "host" / WRONG / "verify.json").read_text())["ok"] is False
    return {"runs": run_dirs, "bandwidth": [R / "bandwidth" / "host" / "bandwidth.csv"],
            "builds": [kdir / "build.json"]}


_CACHE: dict[str, dict[str, list[Path]]] = {}


def cached_real_study(tmp_path_factory) -> dict[str, list[Path]]:
    """:func:`make_real_study` once per test session (shared by the test modules)."""
    if "study" not in _CACHE:
        _CACHE["study"] = make_real_study(tmp_path_factory.mktemp("real-study"))
    return _CACHE["study"]
