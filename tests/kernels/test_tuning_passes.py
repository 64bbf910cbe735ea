"""Tuning's cost bounds, on synthetic bench-gemm results: one runner process per candidate
for every class (a process that fails as a whole keeps the failure to the calls it concerns),
the screening pass that times only each class's finalists again, and the class files cut out
of one tuning of several classes."""

from __future__ import annotations

import pytest

from phonetrain.errors import PhonetrainError
from phonetrain.kernels import load_version, trials, tuning
from phonetrain.kernels.gemm import GemmShape

SHAPES = [GemmShape("gemm_nt", 32, 256, 784), GemmShape("gemm_tn", 256, 784, 32),
          GemmShape("gemm_nn", 32, 128, 16)]
CLASSES = [tuning.gemm_class(g) for g in SHAPES]


def _scores(table):
    """run_spec giving candidate i (by its defines, in the space's order) ``table[i][call]``
    GFLOPS on each call (index into SHAPES), recording every spec it ran."""
    space = load_version("tiled").candidates
    options = [tuning.candidate_version(load_version("tiled"), c).options for c in space]
    ran = []

    def run(spec):
        ran.append(spec)
        i = options.index(spec["options"])
        cases = []
        for c in spec["cases"]:
            k = SHAPES.index(GemmShape(c["kernel"], c["M"], c["N"], c["K"]))
            cases.append({**c, "status": "ok", "gflops": table[i][k], "max_err": 0})
        return {"status": "ok", "cases": cases}
    return run, ran


def test_one_process_per_candidate_gives_each_class_its_own_choice():
    n = len(load_version("tiled").candidates)
    table = [[10.0, 10.0, 10.0] for _ in range(n)]
    table[3] = [50.0, 1.0, 10.0]      # candidate 3 best on the first class only
    table[5] = [1.0, 50.0, 10.0]      # candidate 5 on the second
    run, ran = _scores(table)
    doc = tuning.tune(load_version("tiled"), SHAPES, run, source="gemm.cl")
    assert len(ran) == n and all(len(s["cases"]) == 3 for s in ran)
    t = doc["trials"]
    assert doc["classes"][CLASSES[0]]["defines"] == t[3]["defines"]
    assert doc["classes"][CLASSES[1]]["defines"] == t[5]["defines"]
    assert doc["classes"][CLASSES[2]]["defines"] == t[0]["defines"]   # a tie: the defaults


def test_screening_times_only_the_finalists_and_chooses_among_them():
    n = len(load_version("tiled").candidates)
    table = [[float(i + 1)] * 3 for i in range(n)]   # the last candidate fastest everywhere
    run, ran = _scores(table)
    doc = tuning.tune(load_version("tiled"), SHAPES, run, source="gemm.cl", finalists=2,
                      screen_min_time_ms=5.0, min_time_ms=20.0)
    first, second = ran[:n], ran[n:]
    assert all(s["repeats"] == 1 and s["min_time_ms"] == 5.0 and len(s["cases"]) == 3
               for s in first)
    # the defaults and the two fastest, each once, on every class they are a finalist of
    assert len(second) == 3 and all(s["repeats"] == 3 and s["min_time_ms"] == 20.0
                                    for s in second)
    t = doc["trials"]
    for cls in CLASSES:
        assert doc["classes"][cls]["defines"] == t[n - 1]["defines"]
    assert {c["pass"] for c in t[n - 1]["cases"]} == {2}
    assert {c["pass"] for c in t[1]["cases"]} == {1}


def test_a_screened_out_candidate_cannot_win_and_the_defaults_always_reach_the_final():
    n = len(load_version("tiled").candidates)
    table = [[10.0] * 3] + [[20.0 + i] * 3 for i in range(1, n)]
    run, ran = _scores(table)
    doc = tuning.tune(load_version("tiled"), SHAPES, run, source="gemm.cl", finalists=1)
    finals = [s for s in ran[n:]]
    assert len(finals) == 2            # the fastest and the defaults
    assert doc["classes"][CLASSES[0]]["defines"] == doc["trials"][n - 1]["defines"]
    # no screening when the space is not larger than the finalists and the defaults
    run, ran = _scores([[1.0] * 3] * n)
    tuning.tune(load_version("tiled"), SHAPES, run, source="gemm.cl", finalists=n - 1)
    assert len(ran) == n and all(s["repeats"] == 3 for s in ran)


def test_a_process_that_fails_reruns_each_call_alone_but_a_build_error_does_not():
    from phonetrain.runner import KernelBuildError

    v = load_version("tiled")
    calls = []

    def crash_on_the_last(spec):
        calls.append(len(spec["cases"]))
        if any(c["K"] == 16 for c in spec["cases"]):
            raise PhonetrainError("runner killed by signal 11")
        return {"status": "ok", "cases": [{**c, "status": "ok", "gflops": 5.0, "max_err": 0}
                                          for c in spec["cases"]]}
    status, cases = trials.run_cases(v, SHAPES, crash_on_the_last, source="g.cl",
                                     min_time_ms=1, repeats=1)
    assert status == "ok" and calls == [3, 1, 1, 1]
    assert [c["status"] for c in cases] == ["ok", "ok", "error"]
    assert "signal 11" in cases[2]["error"]

    calls.clear()

    def no_build(spec):
        calls.append(len(spec["cases"]))
        raise KernelBuildError("bench-gemm: program build failed", 5)
    status, cases = trials.run_cases(v, SHAPES, no_build, source="g.cl", min_time_ms=1,
                                     repeats=1)
    assert status.startswith("error: ") and cases == [] and calls == [3]


def test_class_doc_keeps_one_class_and_its_cases():
    n = len(load_version("tiled").candidates)
    run, _ = _scores([[float(i + 1), 2.0, 3.0] for i in range(n)])
    doc = tuning.tune(load_version("tiled"), SHAPES, run, source="gemm.cl")
    one = tuning.class_doc(doc, CLASSES[1], CLASSES)
    assert set(one["classes"]) == {CLASSES[1]} and one["default"] == CLASSES[1]
    assert all(len(t["cases"]) == 1 and t["cases"][0]["K"] == 32 for t in one["trials"])
    assert tuning.tuning_problem(one) is None
    skipped = tuning.class_doc({"version": "clblast", "classes": {}, "default": None,
                                "skipped": "no CLBlast", "trials": []}, CLASSES[0], CLASSES)
    assert skipped["skipped"] == "no CLBlast" and skipped["classes"] == {}


def test_no_candidate_passing_a_class_names_it():
    v = load_version("tiled")

    def wrong(spec):
        return {"status": "ok", "cases": [{**c, "status": "wrong" if c["K"] == 32 else "ok",
                                           "gflops": 5.0, "max_err": 1.0} for c in spec["cases"]]}
    with pytest.raises(tuning.TuningError, match=CLASSES[1]):
        tuning.tune(v, SHAPES, wrong, source="gemm.cl", finalists=2)
