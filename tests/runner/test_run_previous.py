"""``runner run --previous-plan P --previous-out D`` (``src/runner/run.c``): one process sets up
two plans on one backend and device and alternates their measured iterations, the order
reversed every round; each side writes its own folder (run.json, trace.csv, dumps,
checkpoints) in the one-plan format and verifies against its own reference. A pair of two
backends, or half a pair, is refused naming the flag. PoCL and the C CPU backend."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from helpers.adb import connect_vdev, disconnect_vdev
from phonetrain import reference
from phonetrain import runner as rt
from phonetrain.devices.adb import AdbTransport
from phonetrain.lowering import LowerSpec, write_bundle
from phonetrain.plan import Plan


def _spec(model: str, backend: str = "opencl", iterations: int = 4) -> LowerSpec:
    placement = "resident" if backend in ("opencl", "vulkan") else None
    return LowerSpec(model=model, batch_size=8, backend=backend, placement=placement,
                     transfer="copy" if placement else None, warmup=1, iterations=iterations,
                     num_batches=2, dumps="all", dataset="synthetic")


def _runner(runner, pocl, root: Path) -> rt.Runner:
    return rt.Runner.local_binary(runner, root, pocl, timeout_s=300)


def _iteration_starts(out: Path) -> pd.Series:
    """Each measured iteration's first host time (CLOCK_MONOTONIC ns) from trace.csv."""
    tr = pd.read_csv(out / "trace.csv")
    return tr[tr["warmup"] == 0].groupby("iteration")["host_begin_ns"].min()


def test_two_plans_in_one_process_alternate_and_each_verifies(runner, pocl, tmp_path):
    root = tmp_path / "root"
    slow = write_bundle(_spec("lenet5"), root)               # the previous side: far more work
    fast = write_bundle(_spec("mlp_16_16"), root)
    prev_out, new_out = tmp_path / "previous", tmp_path / "new"
    new_doc = _runner(runner, pocl, root).run(fast, new_out, threads=1,
                                              previous=(slow, prev_out))
    prev_doc = json.loads((prev_out / "run.json").read_text())
    for doc, plan, out, side in ((prev_doc, slow, prev_out, "previous"),
                                 (new_doc, fast, new_out, "new")):
        assert doc["status"] == "ok" and doc["plan_path"] == str(plan)
        assert doc["side_by_side"]["side"] == side
        assert len([i for i in doc["iters"] if not i["warmup"]]) == 4
        assert doc["probe"]["before_ms"] > 0 and doc["probe"]["after_ms"] > 0
        assert set(doc["files"]) == {"trace.csv"} | set(doc["dumps"])   # its own ledger
        v = reference.verify_run_dir(Plan.load(plan), root, out)
        assert v["method"] == "per-step" and v["ok"], (side, v["worst"], v["max_abs_err"])
    assert prev_doc["probe"] == new_doc["probe"]          # one probe, written into both
    med = [pd.Series([i["wall_ms"] for i in d["iters"] if not i["warmup"]]).median()
           for d in (prev_doc, new_doc)]
    assert med[0] > med[1], med                           # lenet5 is measured slower
    # rounds: previous, new | new, previous | previous, new | new, previous
    a, b = _iteration_starts(prev_out), _iteration_starts(new_out)
    order = sorted([(t, "p") for t in a] + [(t, "n") for t in b])
    assert "".join(s for _, s in order) == "pnnppnnp"


def test_two_vulkan_plans_in_one_process_each_verify(runner, lavapipe, tmp_path):
    """Two Vulkan run contexts (each its own device, pipelines, buffers) in one process."""
    root = tmp_path / "root"
    a = write_bundle(_spec("lenet5", backend="vulkan", iterations=2), root)
    b = write_bundle(_spec("mlp_16_16", backend="vulkan", iterations=2), root)
    doc = _runner(runner, lavapipe, root).run(b, tmp_path / "new", threads=1,
                                              previous=(a, tmp_path / "previous"))
    assert doc["status"] == "ok" and doc["device"]["api"] == "vulkan"
    for plan, out in ((a, tmp_path / "previous"), (b, tmp_path / "new")):
        v = reference.verify_run_dir(Plan.load(plan), root, out)
        assert v["method"] == "per-step" and v["ok"], (out, v["worst"], v["max_abs_err"])


def test_a_phone_pair_brings_both_folders(runner, pocl, adb_server, tmp_path):
    """Over adb (the virtual phone): one process on the device, both sides' folders pulled."""
    root = tmp_path / "root"
    plan = write_bundle(_spec("mlp_16_16", iterations=2), root)
    vd = connect_vdev(adb_server, tmp_path / "phone")
    try:
        r = rt.Runner(AdbTransport("vphone", vd.serial, adb_port=adb_server.port), pocl,
                      timeout_s=300)
        r.push_runner(runner)
        for d in root.iterdir():
            r.transport.push(d, d.name)
        rel = str(plan.relative_to(root))
        doc = r.run(rel, tmp_path / "new", threads=1, previous=(rel, tmp_path / "previous"))
    finally:
        disconnect_vdev(adb_server, vd)
    prev = json.loads((tmp_path / "previous" / "run.json").read_text())
    assert doc["status"] == prev["status"] == "ok"
    assert (doc["side_by_side"]["side"], prev["side_by_side"]["side"]) == ("new", "previous")
    for out in (tmp_path / "new", tmp_path / "previous"):
        v = reference.verify_run_dir(Plan.load(plan), root, out)
        assert v["method"] == "per-step" and v["ok"], (out, v["worst"])


def test_one_plan_writes_no_side_by_side_record(runner, pocl, tmp_path):
    root = tmp_path / "root"
    plan = write_bundle(_spec("mlp_16_16", iterations=2), root)
    doc = _runner(runner, pocl, root).run(plan, tmp_path / "out", threads=1)
    assert doc["status"] == "ok" and "side_by_side" not in doc


def test_adaptive_sides_each_decide(runner, pocl, tmp_path):
    root = tmp_path / "root"
    a = write_bundle(_spec("mlp_16_16", iterations=3), root)
    b = write_bundle(_spec("mlp_16_16", backend="opencl", iterations=5), root)
    doc = _runner(runner, pocl, root).run(
        b, tmp_path / "new", threads=1, checkpoints=False,
        adaptive=rt.Adaptive(ci_target=0.5, max_iterations=40, min_seconds=0, max_seconds=20),
        previous=(a, tmp_path / "previous"))
    prev = json.loads((tmp_path / "previous" / "run.json").read_text())
    for d, least in ((prev, 3), (doc, 5)):
        assert d["measurement"]["mode"] == "adaptive" and d["measurement"]["stopped"]
        assert least <= d["iterations"] <= 40


@pytest.mark.parametrize("what", ["another backend", "a missing plan", "no previous out"])
def test_a_bad_pair_is_refused_naming_the_flag(runner, pocl, tmp_path, what):
    root = tmp_path / "root"
    new = write_bundle(_spec("mlp_16_16", iterations=1), root)
    if what == "another backend":
        prev, flag = write_bundle(_spec("mlp_16_16", backend="cpu", iterations=1), root), \
            r"--previous-plan .* backend cpu, --plan .* opencl"
    else:
        prev, flag = root / "nowhere" / "plan.json", r"--previous-plan .*nowhere"
    r = _runner(runner, pocl, root)
    if what == "no previous out":
        with pytest.raises(rt.BadInputError, match=r"--previous-plan needs --previous-out"):
            r.invoke("run", ["--plan", str(new), "--root", str(root), "--previous-plan",
                             str(new)], out=tmp_path / "new")
        return
    with pytest.raises(rt.BadInputError, match=flag):
        r.run(new, tmp_path / "new", threads=1, previous=(prev, tmp_path / "previous"))
    for out in (tmp_path / "new", tmp_path / "previous"):    # both folders say failed
        doc = json.loads((out / "run.json").read_text())
        assert doc["status"] == "failed" and "--previous-plan" in doc["error"]
