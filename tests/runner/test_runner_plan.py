"""A hand-built 2-layer MLP training plan on the runner: cpu, and opencl (real PoCL) with every
placement/transfer combination; results against hand-written numpy; trace consistency."""

from __future__ import annotations

import numpy as np
import pytest

from phonetrain import runner as rt
from phonetrain.plan import Program, Step, uniform_fill
from helpers.runner_plans import (HID, OUT, PARAMS, W2_INIT, T, mlp_plan, numpy_training, stage,
                                  write_bundle)

COMBOS = [("cpu", "resident", "copy"), ("opencl", "resident", "copy"), ("opencl", "resident", "map"),
          ("opencl", "staged", "copy"), ("opencl", "staged", "map"), ("opencl", "resident", "mixed")]


def _mixed(plan):
    """Resident placement with map transfers for the batch and copies for the loss."""
    steps = []
    for s in plan.steps:
        if s.op == "h2d":
            steps += [Step(op="map", tensor=s.tensor, access="write", phase="transfer"),
                      Step(op="unmap", tensor=s.tensor, phase="transfer")]
        else:
            steps.append(s)
    plan.steps = steps
    return plan


def _run(runner, pocl, tmp_path, backend, placement, method):
    plan = mlp_plan(backend, placement, "copy" if method == "mixed" else method)
    if method == "mixed":
        plan = _mixed(plan)
    path = stage(tmp_path / "bundle", plan)
    sel = pocl if backend == "opencl" else None
    doc = rt.run_plan(runner, path, tmp_path / "bundle", tmp_path / "out", threads=2,
                      device_selector=sel)
    return plan, doc


@pytest.mark.parametrize("backend,placement,method", COMBOS, ids=["-".join(c) for c in COMBOS])
def test_mlp_iteration_matches_numpy(runner, pocl, tmp_path, backend, placement, method):
    plan, doc = _run(runner, pocl, tmp_path, backend, placement, method)
    assert doc["status"] == "ok" and doc["backend"] == backend
    total = plan.warmup + plan.iterations
    ref_losses, ref_params, ref_dW1 = numpy_training(write_bundle(tmp_path / "ref"), total)
    losses = np.array([it["loss"] for it in doc["iters"]])
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-4, atol=1e-5)
    assert losses[-1] < losses[0] or total < 3  # it trains
    out = tmp_path / "out"
    for name in PARAMS:
        got = rt.read_dump(out, name, shape=ref_params[name].shape)
        np.testing.assert_allclose(got, ref_params[name], rtol=1e-4, atol=1e-5, err_msg=name)
    np.testing.assert_allclose(rt.read_dump(out, "dW1", shape=ref_dW1.shape), ref_dW1, rtol=1e-3, atol=1e-5)
    if backend == "opencl":
        assert doc["device"]["platform"] == "Portable Computing Language"
        assert doc["timer_resolution_ns"] >= 1 and doc["device_bytes_allocated"] > 0
        assert {b["program"] for b in doc["build"]} == {p.name for p in plan.programs}
    assert doc["peak_rss_bytes"] > 0 and len(doc["iters"]) == total


@pytest.mark.parametrize("backend,placement,method", COMBOS[1:2] + COMBOS[4:5] + COMBOS[:1],
                         ids=["opencl-resident-copy", "opencl-staged-map", "cpu"])
def test_trace_holds_every_step_once_and_fits_wall_time(runner, pocl, tmp_path, backend, placement, method):
    plan, doc = _run(runner, pocl, tmp_path, backend, placement, method)
    tr = rt.read_trace(tmp_path / "out")
    total = plan.warmup + plan.iterations
    assert sorted(tr["iteration"].unique()) == list(range(total))
    assert tr.groupby("iteration")["warmup"].first().tolist() == [i < plan.warmup for i in range(total)]
    n_maps = sum(s.op == "map" for s in plan.steps)
    for it, rows in tr.groupby("iteration"):
        cmd = rows[rows["op"] != "map_copy"]
        assert cmd["step"].tolist() == list(range(len(plan.steps))), f"iteration {it}"
        assert cmd["op"].tolist() == [s.op for s in plan.steps]
        assert (rows["op"] == "map_copy").sum() == n_maps
        assert rows["seq"].tolist() == list(range(len(rows)))
        device = rows["start_ns"].notna()
        if backend == "opencl":
            assert device.sum() == sum(s.op not in ("load",) for s in plan.steps)
            assert (rows.loc[device, "queued_ns"] <= rows.loc[device, "submit_ns"]).all()
            assert (rows.loc[device, "start_ns"] <= rows.loc[device, "end_ns"]).all()
        else:
            assert not device.any()
        dev_ns = (rows.loc[device, "end_ns"] - rows.loc[device, "start_ns"]).sum()
        host_ns = (rows.loc[~device, "host_end_ns"] - rows.loc[~device, "host_begin_ns"]).sum()
        wall_ms = doc["iters"][it]["wall_ms"]
        assert 0 < (dev_ns + host_ns) / 1e6 <= wall_ms, f"iteration {it}"
    kern = tr[tr["kind"] == "kernel"]
    assert set(kern["name"]) == {s.name for s in plan.steps if s.op == "kernel"}
    assert (kern.groupby("iteration")["flops"].sum() == sum(s.flops for s in plan.steps)).all()
    x_rows = tr[(tr["op"] == "load") & (tr["name"] == "x")]
    assert (x_rows["bytes"] == plan.tensors[T["x"]].size_bytes).all()


def test_runner_uniform_fill_is_bit_identical_to_plan_uniform_fill(runner, tmp_path):
    """The runner's splitmix64 fill is bit-identical to phonetrain.plan.uniform_fill."""
    plan = mlp_plan("cpu", warmup=0, iterations=1)
    plan.steps = [s for s in plan.steps if s.op == "load"]
    plan.dumps = [T["W2"]]
    path = stage(tmp_path / "b", plan)
    rt.run_plan(runner, path, tmp_path / "b", tmp_path / "out")
    want = uniform_fill(W2_INIT["seed"], OUT * HID, W2_INIT["low"], W2_INIT["high"])
    assert np.array_equal(rt.read_dump(tmp_path / "out", "W2"), want)


def test_clblast_gemm_program_matches_numpy_with_host_timed_rows(runner, pocl, tmp_path):
    """Program "source": "clblast" routes every GEMM step to CLBlast; one host-timed trace
    row per GEMM call; results still match numpy."""
    plan = mlp_plan("opencl", "resident", "copy", warmup=1, iterations=1)
    plan.programs = [p for p in plan.programs if p.name != "gemm"] + [Program(name="gemm", source="clblast")]
    path = stage(tmp_path / "bundle", plan)
    try:
        doc = rt.run_plan(runner, path, tmp_path / "bundle", tmp_path / "out", threads=2,
                          device_selector=pocl)
    except rt.MissingLibraryError as e:
        pytest.skip(str(e))
    ref_losses, _, _ = numpy_training(write_bundle(tmp_path / "ref"), 2)
    np.testing.assert_allclose([i["loss"] for i in doc["iters"]], ref_losses, rtol=1e-4)
    tr = rt.read_trace(tmp_path / "out")
    gemm = tr[tr["name"].str.startswith("gemm_")]
    assert len(gemm) == 2 * sum(s.op == "kernel" and s.name.startswith("gemm_") for s in plan.steps)
    assert gemm["start_ns"].isna().all() and (gemm["host_end_ns"] > gemm["host_begin_ns"]).all()


def test_more_threads_than_usable_cpus_is_named(runner, tmp_path, capfd):
    # the CPU backend with 4x the usable CPUs: threads wait for each other, and the runner says
    # so on stderr (the run itself still completes and trains)
    from phonetrain.devices.cpus import availability
    usable = availability().usable
    path = stage(tmp_path / "bundle", mlp_plan("cpu", "resident", "copy"))
    doc = rt.run_plan(runner, path, tmp_path / "bundle", tmp_path / "out", threads=4 * usable,
                      progress=True)  # the runner's stderr reaches the terminal
    assert doc["status"] == "ok" and doc["threads"] == 4 * usable
    err = capfd.readouterr().err
    assert f"runner: warning: {4 * usable} threads on {usable} usable CPUs (oversubscribed" in err


def test_only_the_programs_that_define_a_launched_kernel_are_built(runner, pocl, tmp_path):
    """A plan lists every file of its kernel version; the runner builds those that define a
    kernel the plan launches (after ``void`` or as a macro's argument, comments aside) and
    records the others skipped. A kernel defined where that reading cannot see it (a name
    pasted by the preprocessor) is still found: the skipped programs are built then."""
    plan = mlp_plan("opencl", "resident", "copy")
    path = stage(tmp_path / "bundle", plan)
    kernels = tmp_path / "bundle" / "kernels"
    ew = (kernels / "elementwise.cl").read_text()
    start = ew.index("__kernel void bias_add(")
    end = ew.index("\n}\n", start) + 3
    (kernels / "elementwise.cl").write_text(ew[:start] + ew[end:])
    (kernels / "pasted.cl").write_text(
        "#define KNAME(a, b) a##b\n" +
        ew[start:end].replace("void bias_add(", "void KNAME(bias_, add)("))
    plan.programs.append(Program(name="pasted", source="kernels/pasted.cl"))
    plan.save(path)
    doc = rt.run_plan(runner, path, tmp_path / "bundle", tmp_path / "out", threads=2,
                      device_selector=pocl)
    ref_losses, _, _ = numpy_training(write_bundle(tmp_path / "ref"), plan.warmup + plan.iterations)
    np.testing.assert_allclose([i["loss"] for i in doc["iters"]], ref_losses, rtol=1e-4, atol=1e-5)
    built = {b["program"] for b in doc["build"] if "skipped" not in b}
    skipped = {b["program"] for b in doc["build"] if "skipped" in b}
    assert built == {"elementwise", "gemm", "loss"}
    assert skipped == {p.name for p in plan.programs} - built and "pasted" in skipped
