"""Memory by role in the report: the guideline "Memory" names the role that takes the most of
each model's plan with the numbers of runs.parquet, one row per distinct lowering (the fused
kernel version keeps no gradient buffers), the largest batch that fit where a batch sweep
ran out of device memory, and says what to set when there is no memory or no sweep; the
figure ``memory_roles`` draws it, or says it has no data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import phonetrain.report.wording as w
from helpers.results import add_plan, write_run
from phonetrain.report import figures
from phonetrain.report.analysis import MEMORY_ROLES, memory_frame
from phonetrain.report.findings import memory
from phonetrain.results import aggregate

CL = dict(backend="opencl", placement="resident", transfer="copy")


def _at_batch(d: Path, batch: int, status: str | None = None) -> Path:
    """Move a :func:`write_run` folder to the name the batch axis gives it, at ``batch``; a
    ``status`` of ``oom`` makes it a run that did not fit."""
    named = d.with_name(d.name.replace(".", f".b{batch}.", 1))
    d.rename(named)
    p = json.loads((named / "params.json").read_text())
    (named / "params.json").write_text(json.dumps(dict(p, run_id=named.name, batch_size=batch)))
    if status == "oom":
        (named / "run.json").write_text(json.dumps({"status": "oom", "reason": "no room",
                                                    "batch_size": batch}))
    return named


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """LeNet-5 on the CPU and resident with the baseline and fused versions, and the MLP on
    the CPU, batch 32; every folder holds its real plan."""
    root = tmp_path_factory.mktemp("mem")
    ds = [add_plan(write_run(root, model="lenet5"), "lenet5"),
          add_plan(write_run(root, model="lenet5", kernel="baseline", **CL), "lenet5"),
          add_plan(write_run(root, model="lenet5", kernel="fused", **CL), "lenet5", "fused"),
          add_plan(write_run(root, model="mlp_784_256_128_16"), "mlp_784_256_128_16")]
    return aggregate.tables(ds)["runs"]


def test_guideline_names_the_largest_role_with_the_tables_numbers(runs):
    m = memory_frame(runs)
    assert len(m) == 3    # cpu and baseline share one plan memory; fused is its own
    lenet = m[(m["model"] == "lenet5") & (m["variant"] == "cpu, baseline")].iloc[0]
    fused = m[(m["model"] == "lenet5") & (m["variant"] == "fused")].iloc[0]
    assert fused["grad_bytes"] == 0 < lenet["grad_bytes"]
    roles = {lab: lenet[c] for c, lab in MEMORY_ROLES}
    assert lenet["dominant"] == max(roles, key=roles.get)
    f = memory(runs)
    assert f.measured and "No batch sweep: set sweep.batches" in f.statement
    top = next(c for c, lab in MEMORY_ROLES if lab == lenet["dominant"])
    assert (f"host, lenet5 (batch 32, cpu, baseline): largest role {lenet['dominant']}, "
            f"{w.size(lenet[top])} of {w.size(lenet['plan_tensor_bytes'])} "
            f"({w.pct(lenet['dominant_share'])}") in f.statement
    assert len(f.table.rows) == 3 and set(f.rows) == {f"runs.parquet: {i}"
                                                      for i in runs["run_id"]}


def test_batch_sweep_gives_the_largest_batch_that_fit(tmp_path):
    ds = [_at_batch(add_plan(write_run(tmp_path / f"b{b}", model="lenet5", kernel="baseline",
                                       **CL), "lenet5", batch_size=b), b, st)
          for b, st in ((8, None), (16, None), (64, "oom"))]
    # the CPU backend ran batch 64 (host memory): it still did not fit the OpenCL device
    ds.append(_at_batch(add_plan(write_run(tmp_path / "cpu", model="lenet5"), "lenet5",
                                 batch_size=64), 64))
    runs = aggregate.tables(ds)["runs"]
    m = memory_frame(runs).set_index("batch_size")
    f = memory(runs)
    assert (f"host, lenet5: the largest batch that fit is 16 "
            f"({w.size(m.loc[16, 'plan_tensor_bytes'])} of tensors); batch 64 ran out of "
            f"device memory ({w.size(m.loc[64, 'plan_tensor_bytes'])})") in f.statement
    assert [r[-1] for r in f.table.rows] == ["no", "no", "yes"]
    assert m.loc[64, "plan_tensor_bytes"] > m.loc[16, "plan_tensor_bytes"]


def test_without_memory_columns_the_guideline_and_figure_say_so(tmp_path):
    runs = aggregate.tables([write_run(tmp_path, model="lenet5")])["runs"]
    f = memory(runs)
    assert not f.measured and "plan.json" in f.statement
    fig = figures.memory_roles(runs, tmp_path / "none.png")
    assert isinstance(fig, figures.NoDataFigure) and "plan.json" in fig.what


def test_figure_draws_one_panel_per_device_and_model(runs, tmp_path):
    drawn = []
    orig = figures._save
    figures._save = lambda fig, p, dpi: (drawn.append(fig), orig(fig, p, dpi))[1]
    try:
        path = figures.memory_roles(runs, tmp_path / "memory_roles.png")
    finally:
        figures._save = orig
    assert not isinstance(path, figures.NoDataFigure)
    titles = sorted(ax.get_title() for ax in drawn[0].axes)
    assert titles == ["host: lenet5", "host: mlp_784_256_128_16"]
    lenet = next(ax for ax in drawn[0].axes if ax.get_title() == "host: lenet5")
    ticks = [t.get_text() for t in lenet.get_yticklabels()]
    assert ticks == ["batch 32 (cpu, baseline)", "batch 32 (fused)"]
    legend = [t.get_text() for t in drawn[0].legends[0].get_texts()]
    assert legend == [lab for _, lab in MEMORY_ROLES]
    assert path.with_suffix(".svg").exists()
