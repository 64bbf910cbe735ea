"""Memory against batch size: the ``sweep.batches`` axis crosses every model with batch sizes
(distinct run folders; the default sweep unchanged), and a batch whose tensors do not fit on
the device is a recorded outcome: the real runner on PoCL limited to 1 GiB
(``POCL_MEMORY_LIMIT=1``: 256 MiB largest allocation) fails to allocate LeNet-5's 321 MB
``conv1.col`` at batch 4096 (exit 9); ``phonetrain run`` succeeds with a run folder whose
run.json says ``oom``, the runs table has an ``oom`` row with its batch size, and the report
names the largest batch that fits, with the bytes of the plan that did not."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers import STEADY
import phonetrain.report.wording as w
from helpers.results import add_plan, summary_paths, write_run
from phonetrain.cli import main
from phonetrain.config import compose_sweep
from phonetrain.report.analysis import largest_batch
from phonetrain.report import figures
from phonetrain.plan import Plan
from phonetrain.report.findings import batch_size, memory as memory_finding
from phonetrain.results import aggregate, memory, schema

OOM_BATCH = 4096
RUN = "lenet5.opencl.baseline"


def test_batches_cross_every_model_and_name_run_folders():
    sweep = compose_sweep(["sweep=test", "sweep.batches=[8,16]"])
    got = {(e.id, e.config["model"]["batch_size"]) for e in sweep.experiments}
    assert ("mlp_16_16.b8.cpu.none", 8) in got and ("mlp_16_16.b16.opencl.baseline", 16) in got
    assert len({e.config_hash for e in sweep.experiments}) == len(sweep.experiments) == 8
    # without sweep.batches (batch None) an experiment keeps the id of before
    assert dataclasses.replace(sweep.experiments[0], batch=None).id == \
        "mlp_784_256_128_16.cpu.none"


@pytest.fixture(scope="module")
def oom_run(runner, pocl, tmp_path_factory):
    """LeNet-5 on PoCL at batch 4096 under a 1 GiB device limit: out of device memory."""
    R = tmp_path_factory.mktemp("batch") / "results"
    # the session's runner compile is the one this run would make: seed the runner cache
    shutil.copytree(runner.parent, R / "build" / ".runner-cache" / runner.parent.name)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POCL_MEMORY_LIMIT", "1")
        mp.setenv("PHONETRAIN_LOCK_DIR", str(R.parent / "locks"))  # not other users' host lock
        res = CliRunner().invoke(main, [
            "run", "model=lenet5", "device=host", "backend=opencl", "kernel=baseline",
            f"model.batch_size={OOM_BATCH}", "dataset.num_batches=1", f"results_dir={R}",
            "measure.warmup=1", "measure.iterations=2", "measure.progress=false",
            "measure.checkpoints=[]", *STEADY])
    assert res.exit_code == 0, (res.output, res.exception)
    return R / "runs" / "host" / RUN, res.output


def _fitting_run(root: Path, batch: int, ms: float, buffer_bytes: int) -> Path:
    """A verified run folder of the same model/device/backend at ``batch`` (recipe of
    helpers.results, timings scaled), named as the batch axis names it."""
    d = write_run(root, model="lenet5", backend="opencl", placement="resident",
                  transfer="copy", kernel="baseline", kernel_ns=int(ms * 1e6 / 3))
    named = d.with_name(f"lenet5.b{batch}.opencl.baseline")
    d.rename(named)
    p = json.loads((named / "params.json").read_text())
    (named / "params.json").write_text(json.dumps(dict(p, run_id=named.name, batch_size=batch)))
    run = json.loads((named / "run.json").read_text())
    (named / "run.json").write_text(json.dumps(dict(run, device_bytes_allocated=buffer_bytes)))
    return named


def test_out_of_memory_is_a_recorded_outcome(oom_run):
    rdir, out = oom_run
    assert "oom" in out and "CL_INVALID_BUFFER_SIZE" in out and "conv1.col" in out
    doc = json.loads((rdir / "run.json").read_text())
    assert doc["status"] == "oom" and doc["batch_size"] == OOM_BATCH
    assert not (rdir / "failed.json").exists()
    row = aggregate.tables([rdir])["runs"].iloc[0]
    assert row["status"] == "oom" and row["batch_size"] == OOM_BATCH
    assert "out of device memory" in row["status_reason"]


def test_summary_names_the_largest_batch_that_fits(oom_run, tmp_path):
    rdir, _ = oom_run
    fits = [_fitting_run(tmp_path / f"b{b}", b, ms, b * 100_000)
            for b, ms in ((8, 2.0), (16, 3.0))]
    paths = aggregate.aggregate([*fits, rdir], summary_paths(tmp_path / "summary"))
    runs = schema.read_table(paths["runs"], "runs")
    assert sorted(runs["status"]) == ["ok", "ok", "oom"]
    (lim,) = largest_batch(runs).to_dict("records")
    assert (lim["largest_ok"], lim["smallest_oom"], lim["batches"]) == (16, OOM_BATCH, 3)
    f = batch_size(runs)
    assert f.measured and f.table.rows[0][4:6] == ["16", str(OOM_BATCH)]
    assert "runs.parquet: host/lenet5.opencl.baseline" in f.rows
    fig = figures.batch_sweep(runs, tmp_path / "batch_sweep.png")
    empty = figures.batch_sweep(runs[runs["status"] == "oom"], tmp_path / "none.png")  # no series
    assert fig.stat().st_size > 2 * empty.stat().st_size      # drawn, not a no-data note


def test_memory_names_the_bytes_of_the_plan_that_did_not_fit(oom_run, tmp_path):
    rdir, _ = oom_run
    fits = [add_plan(_fitting_run(tmp_path / f"b{b}", b, ms, b * 100_000), "lenet5",
                     batch_size=b) for b, ms in ((8, 2.0), (16, 3.0))]
    runs = aggregate.tables([*fits, rdir])["runs"]
    oom = runs[runs["status"] == "oom"].iloc[0]
    plan = Plan.load(rdir / "plan.json")
    assert oom["plan_tensor_bytes"] == memory.role_bytes(plan)["plan_tensor_bytes"]
    assert oom["scratch_bytes"] > plan.by_name("conv1.col").size_bytes   # the 321 MB columns
    f = memory_finding(runs)
    assert "host, lenet5: the largest batch that fit is 16" in f.statement
    assert (f"batch {OOM_BATCH} ran out of device memory "
            f"({w.size(oom['plan_tensor_bytes'])})") in f.statement
