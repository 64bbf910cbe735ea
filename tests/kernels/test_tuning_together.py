"""The candidates of a tuning pass in one runner process (``together``,
:func:`phonetrain.kernels.trials.run_candidates`), on synthetic bench-gemm results that follow
each case's own build options as the runner does: the same trials and the same choice as one
process per candidate, with one process per pass; a candidate whose program does not build
fails only its own cases; a process that fails as a whole runs each candidate alone again."""

from __future__ import annotations

from phonetrain.errors import PhonetrainError
from phonetrain.kernels import load_version, trials, tuning
from phonetrain.kernels.gemm import GemmShape

SHAPES = [GemmShape("gemm_nt", 32, 256, 784), GemmShape("gemm_tn", 256, 784, 32),
          GemmShape("gemm_nn", 32, 128, 16)]
CLASSES = [tuning.gemm_class(g) for g in SHAPES]


def _device(table, broken: int | None = None, crash_together: bool = False):
    """run_spec of a planted device: candidate i of tiled's space (known by its build options,
    a case's own or else the spec's) reaches ``table[i][call]`` GFLOPS; candidate ``broken``
    does not build (a case of its own options: ``build_failed``; its spec alone: the runner's
    build exit code); with ``crash_together`` a process of several configurations crashes.
    Records every spec it ran."""
    from phonetrain.runner import KernelBuildError

    v = load_version("tiled")
    options = [tuning.candidate_version(v, c).options for c in v.candidates]
    ran = []

    def run(spec):
        ran.append(spec)
        own = {c["options"] for c in spec["cases"] if "options" in c}
        if crash_together and len(own) > 1:
            raise PhonetrainError("runner killed by signal 11")
        if broken is not None and "options" not in spec["cases"][0] and \
                spec["options"] == options[broken]:
            raise KernelBuildError("bench-gemm: program build failed", 5)
        cases = []
        for c in spec["cases"]:
            i = options.index(c.get("options", spec["options"]))
            if i == broken:
                cases.append({**c, "status": "error", "build_failed": True,
                              "error": "building gemm.cl failed (CL_BUILD_PROGRAM_FAILURE)"})
                continue
            k = SHAPES.index(GemmShape(c["kernel"], c["M"], c["N"], c["K"]))
            cases.append({**c, "status": "ok", "gflops": table[i][k], "max_err": 0})
        return {"status": "ok", "cases": cases}
    return run, ran


def _table(n: int) -> list[list[float]]:
    table = [[10.0, 10.0, 10.0] for _ in range(n)]
    table[3] = [50.0, 1.0, 10.0]      # candidate 3: the clear winner of the first class
    table[5] = [1.0, 50.0, 10.0]      # candidate 5: of the second
    return table


def _choices(doc: dict) -> dict[str, dict]:
    return {cls: doc["classes"][cls]["defines"] for cls in CLASSES}


def test_one_process_per_pass_gives_the_choices_of_one_per_candidate():
    v = load_version("tiled")
    n = len(v.candidates)
    for finalists, passes in ((0, 1), (2, 2)):
        run, alone = _device(_table(n))
        doc_alone = tuning.tune(v, SHAPES, run, source="gemm.cl", finalists=finalists)
        run, together = _device(_table(n))
        doc = tuning.tune(v, SHAPES, run, source="gemm.cl", finalists=finalists,
                          together=True)
        assert len(together) == passes and len(alone) >= n
        assert len(together[0]["cases"]) == n * len(SHAPES)
        assert _choices(doc) == _choices(doc_alone)
        assert _choices(doc)[CLASSES[0]] == doc["trials"][3]["defines"]
        assert _choices(doc)[CLASSES[1]] == doc["trials"][5]["defines"]
        assert _choices(doc)[CLASSES[2]] == doc["trials"][0]["defines"]   # a tie: defaults
        assert [t["status"] for t in doc["trials"]] == ["ok"] * n
        assert [[c["gflops"] for c in t["cases"]] for t in doc["trials"]] == \
            [[c["gflops"] for c in t["cases"]] for t in doc_alone["trials"]]


def test_a_candidate_that_does_not_build_fails_alone_in_the_shared_process():
    v = load_version("tiled")
    n = len(v.candidates)
    run, together = _device(_table(n), broken=3)
    doc = tuning.tune(v, SHAPES, run, source="gemm.cl", together=True)
    assert len(together) == 1
    t = doc["trials"]
    assert t[3]["status"].startswith("error: building") and t[3]["cases"] == []
    assert all(x["status"] == "ok" for i, x in enumerate(t) if i != 3)
    assert _choices(doc)[CLASSES[1]] == t[5]["defines"]
    run, _ = _device(_table(n), broken=3)   # alone: the same trial fails, the same choices
    doc_alone = tuning.tune(v, SHAPES, run, source="gemm.cl")
    assert doc_alone["trials"][3]["status"].startswith("error: ")
    assert _choices(doc_alone) == _choices(doc)


def test_a_shared_process_that_fails_runs_each_candidate_alone():
    v = load_version("tiled")
    n = len(v.candidates)
    run, ran = _device(_table(n), crash_together=True)
    got = trials.run_candidates([tuning.candidate_version(v, c) for c in v.candidates],
                                [SHAPES] * n, run, source="gemm.cl", min_time_ms=1,
                                repeats=1, together=True)
    assert len(ran) == 1 + n   # the shared one, then one per candidate
    assert [st for st, _ in got] == ["ok"] * n
    assert [[c["gflops"] for c in cases] for _, cases in got] == _table(n)
