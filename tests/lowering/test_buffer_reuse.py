"""Buffer reuse in the lowering (phonetrain.lowering.reuse): no two tensors whose lifetimes
overlap share a buffer, what the step's state and the checks read is never shared, the plan
bytes drop (memory.py's plan_buffer_bytes), pipelined wait lists order every use of shared
storage, and plans lowered without the option keep their JSON."""

from __future__ import annotations

import json

import pytest

from phonetrain.kernels import bind_args, buffer_access
from phonetrain.lowering import LowerSpec
from phonetrain.lowering import reuse
from phonetrain.lowering.build import lower
from phonetrain.lowering.pipeline import _effects
from phonetrain.plan import Plan, PlanError, Step, Tensor
from phonetrain.results import memory

PLACEMENTS = [dict(backend="cpu"),
              dict(backend="opencl", placement="resident", transfer="copy"),
              dict(backend="opencl", placement="staged", transfer="map"),
              dict(backend="opencl", placement="pipelined", transfer="copy"),
              dict(backend="opencl", placement="staged", transfer="copy", kernel="image")]


def _plan(model: str, reuse_buffers: bool, **kw) -> Plan:
    return lower(LowerSpec(model=model, batch_size=8, reuse_buffers=reuse_buffers, **kw))


def _disjoint(plan: Plan) -> None:
    life = reuse.lifetimes(plan.steps)
    by_buf: dict[str, list] = {}
    for t in plan.tensors:
        if t.buffer is not None:
            by_buf.setdefault(t.buffer, []).append(life[t.id])
    assert by_buf, "nothing shared"
    for name, lts in by_buf.items():
        assert len(lts) >= 2
        lts.sort(key=lambda lt: lt.first)
        for a, b in zip(lts, lts[1:]):
            assert a.last < b.first, (name, plan.tensors[a.tid].name, plan.tensors[b.tid].name)


@pytest.mark.parametrize("model", ["vgg_small", "mobilenetv2_small"])
@pytest.mark.parametrize("kw", PLACEMENTS, ids=lambda kw: "-".join(map(str, kw.values())))
def test_shared_tensors_never_overlap_and_bytes_drop(model, kw):
    plain, shared = _plan(model, False, **kw), _plan(model, True, **kw)
    _disjoint(shared)
    before, after = plain.allocated_bytes, shared.allocated_bytes
    assert before == sum(t.size_bytes for t in plain.tensors)
    # the image version's GEMM operands B (padded image buffers) stay unshared
    assert after < (0.9 if kw.get("kernel") == "image" else 0.6) * before, (before, after)
    keep = set(shared.dumps) | set(shared.checkpoints["tensors"])
    pgrads = {f"{t.name}.grad" for t in shared.tensors if t.role == "param"}
    images = {a["t"] for s in shared.steps if s.op == "kernel" for a in s.args if
              "image_width4" in a}
    for t in shared.tensors:
        if t.buffer is None:
            continue
        assert t.role in ("activation", "scratch", "grad") and t.name not in pgrads, t.name
        assert t.id not in keep and t.id not in images and t.init == {"kind": "zeros"}, t.name
    assert Plan.from_json(json.loads(json.dumps(shared.to_json()))).buffers == shared.buffers
    mem, plain_mem = memory.role_bytes(shared), memory.role_bytes(plain)
    assert mem["plan_buffer_bytes"] == after and plain_mem["plan_buffer_bytes"] == before
    assert mem["plan_tensor_bytes"] == plain_mem["plan_tensor_bytes"] == before


def test_dumped_tensors_are_never_shared():
    plan = _plan("vgg_small", True, backend="cpu", dumps="all")
    assert not any(plan.tensors[t].buffer for t in plan.dumps)


def test_plans_without_reuse_keep_their_json_and_id():
    spec = LowerSpec(model="vgg_small", batch_size=4)
    doc = lower(spec).to_json()
    assert "buffers" not in doc and all("buffer" not in t for t in doc["tensors"])
    assert spec.resolved_plan_id() == LowerSpec(model="vgg_small", batch_size=4,
                                                reuse_buffers=False).resolved_plan_id()
    assert spec.resolved_plan_id() != LowerSpec(model="vgg_small", batch_size=4,
                                                reuse_buffers=True).resolved_plan_id()


def _chain() -> tuple[list[Tensor], list[Step]]:
    """x -> A -> B -> C -> D through ``add(t, t)``: each step reads one tensor and writes the
    next, so A and B overlap at step 1 while A and C do not."""
    ts = [Tensor(0, "x", [64], "input")] + [Tensor(i, n, [64], "scratch")
                                            for i, n in enumerate("ABCD", 1)]
    steps = [Step(op="kernel", name="add", args=[{"i": 64}, {"t": i}, {"t": i}, {"t": i + 1}])
             for i in range(4)]
    return ts, steps


def test_a_step_reading_one_tensor_and_writing_another_never_puts_them_in_one_buffer():
    ts, steps = _chain()
    a = reuse.assign(ts, steps)
    assert a.buffer_of[1] == a.buffer_of[3] and a.buffer_of[2] == a.buffer_of[4]
    assert a.buffer_of[1] != a.buffer_of[2]
    assert a.sizes_bytes == [256, 256] and a.excluded[0] == "role input"


def test_a_first_use_in_place_counts_as_a_read():
    ts, steps = _chain()
    steps.insert(0, Step(op="kernel", name="add", args=[{"i": 64}, {"t": 0}, {"t": 3},
                                                         {"t": 3}]))   # C += x before any write
    assert reuse.lifetimes(steps)[3].first_reads
    assert 3 not in reuse.assign(ts, steps).buffer_of


def test_kept_and_read_first_tensors_are_never_shared():
    ts, steps = _chain()
    steps.append(Step(op="kernel", name="add", args=[{"i": 64}, {"t": 1}, {"t": 5},
                                                      {"t": 5}]))   # accumulates into E
    ts.append(Tensor(5, "E", [64], "scratch"))
    a = reuse.assign(ts, steps, keep={3})
    assert 3 not in a.buffer_of and 5 not in a.buffer_of and 1 not in a.buffer_of
    assert "first use reads" in a.excluded[5] and "read after" in a.excluded[3]


def test_a_tensor_that_does_not_fit_its_buffer_is_refused():
    plan = _plan("vgg_small", True, backend="cpu")
    small = min(plan.buffers, key=lambda b: b["size_bytes"])
    big = max((t for t in plan.tensors if t.buffer), key=lambda t: t.size_bytes)
    big.buffer = small["name"]
    if big.size_bytes > small["size_bytes"]:
        with pytest.raises(PlanError, match="does not fit"):
            plan.validate()


def _unordered(plan: Plan) -> tuple[int, list[tuple[int, int]]]:
    """(conflicting pairs, the pairs not ordered): two steps touching one buffer or host copy
    (a tensor's own, or a shared buffer), one of them writing, where the later does not run
    after the earlier -- by its queue's order or through waits."""
    storage = {t.id: t.buffer or t.id for t in plan.tensors}

    def access_of(s):
        bound = bind_args(s.name, s.args)
        return bound, buffer_access(s.name, bound)

    before: list[set[int]] = []
    last_on: dict[int, int] = {}
    for k, s in enumerate(plan.steps):
        deps = set(s.wait) | ({last_on[s.queue]} if s.queue in last_on else set())
        before.append(set().union(*(before[j] | {j} for j in deps)) if deps else set())
        if s.op != "load":
            last_on[s.queue] = k
    effects = [_effects(s, access_of, storage.__getitem__) for s in plan.steps]
    pairs, bad = 0, []
    for k in range(len(plan.steps)):
        rk, wk = effects[k]
        for i in range(k):
            ri, wi = effects[i]
            if (wi & (rk | wk)) or (ri & wk):
                pairs += 1
                if i not in before[k]:
                    bad.append((i, k))
    return pairs, bad


@pytest.mark.parametrize("model", ["vgg_small", "mobilenetv2_small"])
def test_pipelined_waits_order_every_conflict_on_shared_storage(model):
    plan = _plan(model, True, backend="opencl", placement="pipelined", transfer="copy")
    pairs, bad = _unordered(plan)
    assert pairs > 100 and not bad, bad[:5]
    for s in plan.steps:   # the check itself: without waits the queues race
        s.wait = []
    assert _unordered(plan)[1]
