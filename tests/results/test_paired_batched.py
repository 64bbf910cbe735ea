"""A side-by-side GEMM rerun measures a program's short shapes together: one process per build
and pair holds every still undecided shape as a case, each shape keeping its own pairs, looks
and verdict; decided shapes leave the later processes. A stand-in bench with planted ratios
per shape, per-process noise and a host that drifts between pairs (on both builds alike)."""

from __future__ import annotations

import random

import pytest

from phonetrain.results.paired import many_until_decisive, until_decisive
from phonetrain.stages import gemm as gemm_stage
from phonetrain.stages.gemm import GemmShape

PLANTED = {("gemm_nn", 32, 128, 16): 1.3, ("gemm_tn", 256, 784, 32): 1.0,
           ("gemm_nt", 32, 256, 784): 2.0}


class MultiCaseBench:
    """bench-gemm stand-in for side-by-side processes: each process holds both builds (the
    previous under ``previous``); each case's median is 0.5 ms x its planted ratio (new build)
    x the host's state during this process (on both builds alike) x log-normal noise;
    ``fail``: (side, key) pairs whose case fails verification."""

    def __init__(self, seed: int = 11, fail: set | None = None):
        self.rng, self.specs, self.fail = random.Random(seed), [], fail or set()

    def spec(self, spec: dict) -> dict:
        self.specs.append(spec)
        assert ".previous" in spec["previous"]["source"] and ".previous" not in spec["source"]
        host = 1 + 2 * self.rng.random()

        def side(c: dict, new: bool) -> dict:
            key = (c["kernel"], c["M"], c["N"], c["K"])
            ms = 0.5 * host * (PLANTED[key] if new else 1.0) * self.rng.lognormvariate(0, 0.02)
            ok = ("new" if new else "old", key) not in self.fail
            return dict({k: v for k, v in c.items() if k != "previous"},
                        status="ok" if ok else "wrong", median_ms=ms,
                        gflops=2 * c["M"] * c["N"] * c["K"] / ms / 1e6, max_err=0.0)
        cases = [dict(side(c, True), previous=side(c["previous"], False))
                 for c in spec["cases"]]
        return {"status": "ok", "options": spec["options"], "cases": cases,
                "previous": dict(spec["previous"], build_ms=1.0)}   # as the runner echoes it


def _planned() -> tuple[list, dict, dict]:
    """(planned shapes, previous specs, previous sweep document): every shape of PLANTED with
    a 0.5 ms previous call, one program."""
    planned, before, rows = [], {}, []
    for key in PLANTED:
        g = GemmShape(*key)
        case = {"kernel": g.kernel, "M": g.M, "N": g.N, "K": g.K, "global": [1], "local": [1]}
        spec = {"backend": "opencl", "source": "kernels/baseline/gemm.cl", "options": "-DX=1",
                "min_time_ms": 100.0, "repeats": 5, "cases": [case]}
        planned.append(("model", g, None, spec))
        before[key] = dict(spec, source="kernels/baseline.previous/gemm.cl")
        rows.append({"kernel": g.kernel, "M": g.M, "N": g.N, "K": g.K, "status": "ok",
                     "median_ms": 0.5})
    return planned, before, {"rows": rows}


def test_short_shapes_of_one_program_share_each_pairs_processes():
    bench = MultiCaseBench()
    planned, before, prev = _planned()
    thunks = gemm_stage._paired_batches(bench, planned, before, prev)
    assert set(thunks) == set(PLANTED)
    docs = {key: thunks[key]() for key in PLANTED}
    v = {key: d["paired"] for key, d in docs.items()}
    assert v[("gemm_nn", 32, 128, 16)]["verdict"] == "slower"
    assert v[("gemm_nn", 32, 128, 16)]["low"] <= 1.3 <= v[("gemm_nn", 32, 128, 16)]["high"]
    assert v[("gemm_tn", 256, 784, 32)]["verdict"] == "no change"
    assert v[("gemm_nt", 32, 256, 784)]["verdict"] == "slower"
    # processes: one per pair of the shape that took most pairs, not one per pair per shape
    most = max(x["pairs"] for x in v.values())
    assert len(bench.specs) == most < sum(x["pairs"] for x in v.values())
    assert all(s["repeats"] == gemm_stage.BATCH_REPEATS and
               s["min_time_ms"] == gemm_stage.BATCH_MIN_TIME_MS for s in bench.specs)
    # a decided shape leaves the later processes; the first ones hold all three
    assert len(bench.specs[0]["cases"]) == 3
    for key, x in v.items():
        holding = [s for s in bench.specs
                   if any((c["kernel"], c["M"], c["N"], c["K"]) == key for c in s["cases"])]
        assert len(holding) == x["pairs"]
    # the order of the builds reverses every pair
    assert [s["previous"]["first"] for s in bench.specs] == [1 - k % 2 for k in range(most)]
    # every case carries the previous build's own case (its launch sizes)
    assert all(c["previous"]["M"] == c["M"] for s in bench.specs for c in s["cases"])
    for key, d in docs.items():
        assert d["cases"][0]["low_ms"] <= d["cases"][0]["median_ms"] <= d["cases"][0]["high_ms"]


def test_a_long_call_and_a_shape_without_a_previous_row_keep_their_own_processes():
    bench = MultiCaseBench()
    planned, before, prev = _planned()
    prev["rows"][0]["median_ms"] = gemm_stage.BATCH_MAX_CALL_MS     # long: its own processes
    prev["rows"][1]["status"] = "skipped"                             # no previous call
    thunks = gemm_stage._paired_batches(bench, planned, before, prev)
    assert set(thunks) == {("gemm_nt", 32, 256, 784)}
    assert bench.specs == []                  # nothing measured before the sweep reaches it


def test_two_programs_are_two_groups():
    bench = MultiCaseBench()
    planned, before, prev = _planned()
    planned[2] = (*planned[2][:3], dict(planned[2][3], options="-DX=2"))
    thunks = gemm_stage._paired_batches(bench, planned, before, prev)
    thunks[("gemm_nn", 32, 128, 16)]()
    assert {len(s["cases"]) for s in bench.specs[:1]} == {2}
    assert all(s["options"] == "-DX=1" for s in bench.specs)
    thunks[("gemm_nt", 32, 256, 784)]()
    assert bench.specs[-1]["options"] == "-DX=2" and len(bench.specs[-1]["cases"]) == 1


def test_a_failing_build_in_the_batch():
    old_key, new_key = ("gemm_tn", 256, 784, 32), ("gemm_nt", 32, 256, 784)
    bench = MultiCaseBench(fail={("old", old_key), ("new", new_key)})
    planned, before, prev = _planned()
    thunks = gemm_stage._paired_batches(bench, planned, before, prev)
    old_failed = thunks[old_key]()
    assert old_failed["paired"]["verdict"] == "cannot tell"
    assert old_failed["paired"]["reason"] == gemm_stage.PREVIOUS_FAILED
    new_failed = thunks[new_key]()
    assert "paired" not in new_failed and new_failed["cases"][0]["status"] == "wrong"
    assert "previous" not in new_failed and "previous" not in new_failed["cases"][0]
    assert thunks[("gemm_nn", 32, 128, 16)]()["paired"]["verdict"] == "slower"


def test_many_subjects_stop_each_on_their_own():
    rng = random.Random(3)
    ratios = {"a": 1.5, "b": 1.0, "c": 1.02}
    asked = []

    def pairs(k, active):
        asked.append(list(active))
        host = 1 + rng.random()
        return {s: (host * rng.lognormvariate(0, 0.02),
                    host * ratios[s] * rng.lognormvariate(0, 0.02)) for s in active}

    got = many_until_decisive(pairs, list(ratios), first=3, max_pairs=6, budget_s=1e9)
    assert got["a"]["verdict"] == "slower" and got["b"]["verdict"] == "no change"
    assert [len(a) for a in asked][:3] == [3, 3, 3]
    assert all(len(got[s]["pairs_ms"]) == got[s]["pairs"] for s in ratios)
    assert max(got[s]["pairs"] for s in ratios) == len(asked) <= 6


def test_one_subject_is_until_decisive():
    rng = random.Random(4)

    def pair(k):
        return (1.0 * rng.lognormvariate(0, 0.05), 1.3 * rng.lognormvariate(0, 0.05))
    rng_state = rng.getstate()
    one = until_decisive(pair, first=3, max_pairs=10, budget_s=1e9)
    rng.setstate(rng_state)
    many = many_until_decisive(lambda k, active: {0: pair(k)}, [0], first=3, max_pairs=10,
                               budget_s=1e9)[0]
    assert {k: v for k, v in one.items() if k != "elapsed_s"} == \
        {k: v for k, v in many.items() if k != "elapsed_s"}
    with pytest.raises(ValueError):
        many_until_decisive(lambda k, a: {}, [0], first=5, max_pairs=3, budget_s=1.0)
