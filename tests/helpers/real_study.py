"""A small real study for the aggregate/report tests: the real runner on PoCL, driven through
the user-facing ``phonetrain run`` command (the workflow's code path without Snakemake).

Runs of mlp_784_256_128_16 (1 warm-up + 3 measured iterations) on this host: cpu, opencl
(resident/copy), opencl_staged_map (staged/map), plus opencl_staged (staged/copy) verified
with an impossible tolerance so it is really ``wrong``; and lenet5 on cpu, an expected run
whose folder holds only its params (the ``--keep-going`` case: ``failed``). Plus the
device's bandwidth sweep (runner ``bench-bandwidth`` up to 64 KiB) and the baseline kernel
build that ``phonetrain run`` made (under ``oneoff/``). The ``real_study`` fixture
(tests/conftest.py) runs it once per test session.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from helpers import STEADY
from helpers.workflow import seed_runner_cache
from phonetrain import runner as runner_api
from phonetrain.cli import main

MODEL = "mlp_784_256_128_16"
WRONG = f"{MODEL}.opencl_staged.baseline"
FAILED = "lenet5.cpu.none"
OK = (f"{MODEL}.cpu.none", f"{MODEL}.opencl.baseline", f"{MODEL}.opencl_staged_map.baseline")


def _run(R: Path, *overrides: str) -> None:
    args = ["run", f"model={MODEL}", "device=host", f"results_dir={R}", "measure.warmup=1",
            "measure.iterations=3", "measure.progress=false", *STEADY, *overrides]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, (args, res.output, res.exception)


def make_real_study(root: Path, runner: Path | None = None) -> dict[str, list[Path]]:
    """Run the study under ``root/results`` (with ``runner``, the session's runner build, in
    its runner compile cache: :func:`helpers.workflow.seed_runner_cache`); return the
    aggregate's inputs."""
    R = root / "results"
    if runner is not None:
        seed_runner_cache(R, runner)
    _run(R, "backend=cpu")
    for backend in ("opencl", "opencl_staged_map"):
        _run(R, f"backend={backend}", "kernel=baseline")
    _run(R, "backend=opencl_staged", "kernel=baseline", "measure.checkpoints=[]",
         "measure.verify_atol=1e-12")   # no checkpoints: the trajectory decides, too strictly
    missing = R / "runs" / "host" / FAILED
    missing.mkdir(parents=True)
    (missing / "params.json").write_text(json.dumps({
        "run_id": FAILED, "model": "lenet5", "device": "host", "backend": "cpu",
        "config_hash": "never-ran"}))
    bw = R / "bandwidth" / "host"
    own = R / "oneoff"  # what one-off runs make for themselves (phonetrain.layout)
    runner_api.bench_bandwidth(own / "build" / "host" / "runner", bw, max_bytes=65536,
                               min_time_ms=2, repeats=1)
    assert json.loads((R / "runs" / "host" / WRONG / "verify.json").read_text())["ok"] is False
    runs = [R / "runs" / "host" / r for r in (*OK, WRONG, FAILED)]
    return {"runs": runs, "bandwidth": [bw / "bandwidth.csv"],
            "builds": [own / "build" / "host" / "kernels" / "baseline" / "build.json"]}

