"""The pipelined placement's lowering: staged's transfers, reordered and annotated with
queues and wait lists that follow the read/write hazards."""

from __future__ import annotations

import pytest

from phonetrain.kernels import bind_args, buffer_access
from phonetrain.lowering import LowerError, LowerSpec, lower
from phonetrain.lowering.pipeline import _effects


def _access(s):
    bound = bind_args(s.name, s.args)
    return bound, buffer_access(s.name, bound)


@pytest.mark.parametrize("model", ["mlp_784_256_128_16", "lenet5"])
def test_pipelined_moves_what_staged_moves_on_queue_1(model):
    staged = lower(LowerSpec(model, backend="opencl", placement="staged", transfer="copy"))
    piped = lower(LowerSpec(model, backend="opencl", placement="pipelined", transfer="copy"))
    moves = lambda p: sorted((s.op, s.tensor, s.bytes) for s in p.steps if s.op != "kernel")  # noqa: E731
    assert moves(piped) == moves(staged)
    kernels = lambda p: [(s.name, s.args) for s in p.steps if s.op == "kernel"]  # noqa: E731
    assert kernels(piped) == kernels(staged)
    assert piped.to_json()["plan_version"] == 2 and staged.to_json()["plan_version"] == 1
    assert {s.queue for s in piped.steps if s.op in ("h2d", "d2h")} == {1}
    assert {s.queue for s in piped.steps if s.op in ("kernel", "load")} == {0}
    # some upload goes up while the kernel before it runs: it waits for nothing on queue 0
    # and sits between two kernels
    ks = [k for k, s in enumerate(piped.steps) if s.op == "kernel"]
    early = [k for k in range(ks[0], ks[-1]) if piped.steps[k].op == "h2d"
             and not piped.steps[k].wait]
    assert len(early) > 5


def test_wait_lists_cover_every_cross_queue_hazard():
    """Replaying the steps in order, every read of a resource last written on the other
    queue, and every write over a read or write from the other queue, is covered by a
    wait on that step or a later step of the same queue."""
    plan = lower(LowerSpec("lenet5", backend="opencl", placement="pipelined", transfer="copy"))
    last_write, readers, checked = {}, {}, 0
    for k, s in enumerate(plan.steps):
        if s.op == "load":
            continue
        reads, writes = _effects(s, _access)
        deps = {last_write[r] for r in reads if r in last_write}
        deps |= {last_write[w] for w in writes if w in last_write}
        deps |= {j for w in writes for j in readers.get(w, [])}
        for j in deps:
            if plan.steps[j].queue != s.queue:
                assert s.wait and max(s.wait) >= j and plan.steps[max(s.wait)].queue == \
                    plan.steps[j].queue, (k, j)
                checked += 1
        for r in reads:
            readers.setdefault(r, []).append(k)
        for w in writes:
            last_write[w], readers[w] = k, []
    assert checked > 100


def test_pipelined_refuses_map_transfers():
    with pytest.raises(LowerError, match="placement 'pipelined'.*use transfer 'copy'"):
        lower(LowerSpec("mlp_16_16", backend="opencl", placement="pipelined", transfer="map"))
