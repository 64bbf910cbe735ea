"""The pipelined placement through the real runner on PoCL: it trains like staged, its
transfers run on queue 1 ordered by their events, and a bad wait list is refused; without
profiling events a one-queue plan trains the same, and a pipelined one is refused."""

import json

import numpy as np
import pandas as pd
import pytest

from phonetrain import reference
from phonetrain import runner as runner_api
from phonetrain.lowering import LowerSpec, lower, write_bundle
from phonetrain.plan import Plan, PlanError

pytestmark = pytest.mark.usefixtures("runner")


def _spec(model, placement, backend="opencl", **kw):
    return LowerSpec(model=model, batch_size=4, backend=backend, placement=placement,
                     transfer="copy" if backend == "opencl" else None, warmup=1,
                     iterations=2, num_batches=2, momentum=0.9, dumps="all",
                     dataset="synthetic" if model == "mlp_16_16" else None, **kw)


def _run(runner, pocl, spec, root, plan_edit=None, **run_kw):
    plan_path = write_bundle(spec, root)
    if plan_edit:
        doc = json.loads(plan_path.read_text())
        plan_edit(doc)
        plan_path.write_text(json.dumps(doc))
    out = root / "out" / spec.resolved_plan_id()
    doc = runner_api.run_plan(runner, plan_path, root, out, threads=1,
                              device_selector=pocl if spec.backend == "opencl" else None,
                              **run_kw)
    return Plan.load(plan_path), out, doc


def _dumps(plan, out):
    return {plan.tensor(i).name: np.fromfile(out / "dumps" / f"{plan.tensor(i).name}.f32",
                                             dtype=np.float32) for i in plan.dumps}


@pytest.mark.parametrize("model", ["mlp_784_256_128_16", "lenet5"])
def test_pipelined_trains_like_staged(runner, pocl, tmp_path, model):
    """Per-step verification passes, and every dumped tensor equals the staged run's bit for
    bit: the same kernels run in the same order on the same device, only the copies move."""
    plan, out, doc = _run(runner, pocl, _spec(model, "pipelined"), tmp_path)
    assert doc["status"] == "ok" and doc["plan_version"] == 2
    v = reference.verify_run_dir(plan, tmp_path, out)
    assert v["method"] == "per-step" and v["ok"], (v["worst"], v["max_abs_err"])
    splan, sout, sdoc = _run(runner, pocl, _spec(model, "staged"), tmp_path)
    assert sdoc["plan_version"] == 1
    got, want = _dumps(plan, out), _dumps(splan, sout)
    assert got.keys() == want.keys()
    for name in want:
        assert np.array_equal(got[name], want[name]), name
    assert [it["loss"] for it in doc["iters"]] == [it["loss"] for it in sdoc["iters"]]


def test_trace_orders_kernels_after_their_uploads(runner, pocl, tmp_path):
    """Transfers are on queue 1, kernels on queue 0; on the device clock every kernel starts
    after the last upload of each tensor it reads ended, and every download starts after the
    kernel that produced it ended."""
    plan, out, _ = _run(runner, pocl, _spec("mlp_784_256_128_16", "pipelined"), tmp_path)
    assert (out / "trace.csv").read_text().splitlines(True)[0] == runner_api.TRACE_HEADER
    tr = pd.read_csv(out / "trace.csv", keep_default_na=False)
    assert set(tr.loc[tr["kind"].isin(["h2d", "d2h"]), "queue"]) == {1}
    assert set(tr.loc[tr["kind"] == "kernel", "queue"]) == {0}
    from phonetrain.lowering.pipeline import _effects   # the lowering's own access sets
    from phonetrain.kernels import bind_args, buffer_access

    def access_of(s):
        bound = bind_args(s.name, s.args)
        return bound, buffer_access(s.name, bound)

    checked = 0
    for it, rows in tr.groupby("iteration"):
        by_step = rows.set_index("step")
        last_up, last_kernel_write = {}, {}
        for k, s in enumerate(plan.steps):
            if s.op == "h2d":
                last_up[s.tensor] = k
            elif s.op == "kernel":
                reads, writes = _effects(s, access_of)
                for _, t in reads:
                    if t in last_up:
                        assert by_step.at[k, "start_ns"] >= by_step.at[last_up[t], "end_ns"], (
                            it, k, s.name, plan.tensor(t).name)
                        checked += 1
                for _, t in writes:
                    last_kernel_write[t] = k
            elif s.op == "d2h" and s.tensor in last_kernel_write:
                j = last_kernel_write[s.tensor]
                assert by_step.at[k, "start_ns"] >= by_step.at[j, "end_ns"], (it, k)
                checked += 1
    assert checked > 100
    from phonetrain.results import profiling   # Perfetto: one device track per queue
    events = profiling.perfetto_trace(profiling.read_trace_csv(out / "trace.csv"))["traceEvents"]
    tracks = {(e["pid"], e["tid"], e["cat"]) for e in events if e["ph"] == "X" and e["pid"] == 1}
    assert {c for _, tid, c in tracks if tid == 2} == {"h2d", "d2h"}
    assert {c for _, tid, c in tracks if tid == 1} == {"kernel"}


def test_bad_wait_reference_is_refused_naming_the_step(runner, pocl, tmp_path):
    spec = _spec("mlp_16_16", "pipelined")
    plan = lower(spec)
    k = next(k for k, s in enumerate(plan.steps) if s.op == "kernel" and s.wait)

    def forward_ref(doc):
        doc["steps"][k]["wait"] = [k + 5]

    with pytest.raises(runner_api.BadInputError,
                       match=rf"steps\[{k}\]\.wait\[0\] = {k + 5} names no earlier step"):
        _run(runner, pocl, spec, tmp_path / "a", forward_ref)

    def wait_on_load(doc):
        doc["steps"][k]["wait"] = [0]   # steps[0] is the input's load: no event

    with pytest.raises(runner_api.BadInputError, match=r"names steps\[0\] \(op \"load\"\)"):
        _run(runner, pocl, spec, tmp_path / "b", wait_on_load)

    def version_1(doc):
        doc["plan_version"] = 1

    with pytest.raises(runner_api.BadInputError, match=r"need plan_version 2"):
        _run(runner, pocl, spec, tmp_path / "c", version_1)
    bad = plan.to_json()
    bad["steps"][k]["wait"] = [k]
    with pytest.raises(PlanError, match=rf"steps\[{k}\] .*wait\[0\] = {k} names no earlier"):
        Plan.from_json(bad)


def test_cpu_backend_ignores_queues(runner, pocl, tmp_path):
    """A CPU plan whose kernels carry queue 1 and wait lists runs like the plain plan, also
    with --no-profiling (the refusal of a transfer queue is the OpenCL backend's)."""
    spec = _spec("mlp_16_16", None, backend="cpu")

    def annotate(doc):
        doc["plan_version"] = 2
        kernels = [k for k, s in enumerate(doc["steps"]) if s["op"] == "kernel"]
        for a, b in zip(kernels, kernels[1:]):
            doc["steps"][b].update(queue=b % 2, wait=[a])

    plan, out, doc = _run(runner, pocl, spec, tmp_path / "q", annotate, profiling=False)
    assert doc["plan_version"] == 2 and any(s.wait for s in plan.steps)
    assert doc["profiling"] is False
    assert reference.verify_run_dir(plan, tmp_path / "q", out)["ok"]
    plain, pout, _ = _run(runner, pocl, spec, tmp_path / "p")
    got, want = _dumps(plan, out), _dumps(plain, pout)
    assert all(np.array_equal(got[n], want[n]) for n in want)


def test_pipelined_with_clblast_gemms_verifies(runner, pocl, tmp_path):
    """GEMM steps routed to CLBlast (which takes no wait list) still see their uploads."""
    import ctypes.util
    if not ctypes.util.find_library("clblast"):
        pytest.skip("libclblast is not installed")
    spec = _spec("mlp_784_256_128_16", "pipelined", kernel="clblast")
    plan, out, doc = _run(runner, pocl, spec, tmp_path)
    assert doc["status"] == "ok"
    v = reference.verify_run_dir(plan, tmp_path, out)
    assert v["ok"], (v["worst"], v["max_abs_err"])


def test_unprofiled_run_trains_like_the_profiled_one(runner, pocl, tmp_path):
    """--no-profiling: the same kernels in the same order, so the same tensors bit for bit and
    per-step verification passes; the trace keeps host times but no device times; run.json
    says so. A pipelined plan, whose wait lists need events, is refused naming the reason."""
    spec = _spec("lenet5", "resident")
    plan_path = write_bundle(spec, tmp_path)
    plan = Plan.load(plan_path)
    outs = {}
    for prof in (True, False):
        out = tmp_path / ("profiled" if prof else "unprofiled")
        doc = runner_api.run_plan(runner, plan_path, tmp_path, out, threads=1,
                                  device_selector=pocl, profiling=prof)
        assert doc["status"] == "ok" and doc["profiling"] is prof
        outs[prof] = out, doc
    v = reference.verify_run_dir(plan, tmp_path, outs[False][0])
    assert v["method"] == "per-step" and v["ok"], (v["worst"], v["max_abs_err"])
    got, want = _dumps(plan, outs[False][0]), _dumps(plan, outs[True][0])
    for name in want:
        assert np.array_equal(got[name], want[name]), name
    for prof, (out, _) in outs.items():
        kernels = pd.read_csv(out / "trace.csv").query("kind == 'kernel'")
        assert len(kernels) > 0 and (kernels["host_end_ns"] >= kernels["host_begin_ns"]).all()
        assert kernels["start_ns"].notna().all() if prof else kernels["start_ns"].isna().all()
    with pytest.raises(runner_api.BadInputError, match=r"--no-profiling: .*transfer queue"):
        pspec = _spec("mlp_16_16", "pipelined")
        runner_api.run_plan(runner, write_bundle(pspec, tmp_path / "p"), tmp_path / "p",
                            tmp_path / "p" / "out", threads=1, device_selector=pocl,
                            profiling=False)
