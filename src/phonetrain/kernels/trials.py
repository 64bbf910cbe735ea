"""Tuning trials on the device: one candidate of a version's tuning space run on many GEMM
calls at once, and the screening pass that picks each class's finalists.

A trial runs one candidate (a :class:`~phonetrain.kernels.versions.KernelVersion` with the
candidate's defines and local size) on a list of GEMM calls in **one** runner ``bench-gemm``
process (:func:`run_cases`): each call is its own case there, checked against float64,
warmed up, calibrated and timed on its own (``src/runner/bench_gemm.c``), so a case's figure
is the one a process of its own would give, without a process start, device set-up and
program build per call. A process that fails as a whole keeps the failure to the calls it
concerns: a program that does not build fails every call (one program, one set of build
options); any other failure (a crash, a timeout) runs each call again in a process of its own,
so one call cannot take the candidate away from the others.

On OpenCL the candidates of a pass share one process too (:func:`run_candidates`): each case
carries its candidate's build options, the runner builds each candidate's program once and a
candidate whose program does not build fails only its own cases, so a pass costs one process
start and one device set-up, not one per candidate; a process that fails as a whole runs
each candidate again in a process of its own (:func:`run_cases`).

Screening (:func:`finalists`): with a pass of one short repeat per call behind it, a class's
finalists are its ``k`` fastest candidates that passed the check there, and the version's
defaults (the space's first candidate) when they passed: a near tie, which the tuner gives to
the earlier candidate (:data:`phonetrain.kernels.tuning.TIE_MARGIN`), then still reaches
the defaults whatever the screening's noise.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from ..errors import PhonetrainError
from .gemm import GemmShape, gemm_spec
from .versions import KernelVersion

CASE_KEYS = ("kernel", "M", "N", "K", "status", "gflops", "max_err", "error")
"""What a trial keeps of each bench-gemm case."""


class Skipped(Exception):
    """The device lacks what the version needs (bench-gemm answered ``skipped``): ``reason``."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _first_line(e: Exception) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def _error_case(g: GemmShape, why: str) -> dict[str, Any]:
    return {"kernel": g.kernel, "M": g.M, "N": g.N, "K": g.K, "status": "error",
            "gflops": None, "max_err": None, "error": why}


BUILD_EXIT = 5
"""The runner's exit code of a program that did not build (``src/runner/util.h``
``EXIT_BUILD``; :class:`phonetrain.runner.KernelBuildError`, which this wing may not import)."""


def _builds_nothing(e: PhonetrainError) -> bool:
    """True when the failure is the candidate's program (it fails every call alike)."""
    return getattr(e, "exit_code", None) == BUILD_EXIT


def run_cases(v: KernelVersion, shapes: list[GemmShape],
              run_spec: Callable[[dict[str, Any]], dict[str, Any]], *, source: str,
              min_time_ms: float, repeats: int, backend: str = "opencl"
              ) -> tuple[str, list[dict[str, Any] | None]]:
    """Run the candidate ``v`` on ``shapes`` (module docstring); returns ``(status, cases)``:
    ``"ok"`` and one case per shape, in order (:data:`CASE_KEYS`; a call the candidate cannot
    run has status ``error``; None where the runner gave no case), or ``"error: <why>"`` and
    [] when the candidate fails on every call. Raises :class:`Skipped` when the device lacks
    what the version needs."""
    cases: list[dict[str, Any] | None] = [None] * len(shapes)
    valid, why = [], ""
    for i, g in enumerate(shapes):   # a geometry the candidate cannot launch: that call only
        try:
            gemm_spec(v, [g], source=source, backend=backend)
            valid.append(i)
        except ValueError as e:
            why = why or _first_line(e)
            cases[i] = _error_case(g, why)
    if not valid:
        return f"error: {why}", []
    spec = gemm_spec(v, [shapes[i] for i in valid], source=source, backend=backend,
                     min_time_ms=min_time_ms, repeats=repeats)
    try:
        doc = run_spec(spec)
    except PhonetrainError as e:
        if len(valid) == 1 or _builds_nothing(e):
            return f"error: {_first_line(e)}", []
        failed = []
        for i in valid:   # one call at a time, as a class of its own
            status, one = run_cases(v, [shapes[i]], run_spec, source=source,
                                    min_time_ms=min_time_ms, repeats=repeats, backend=backend)
            cases[i] = one[0] if one else _error_case(shapes[i], status[len("error: "):])
            if not one:
                failed.append(status)
        if len(failed) == len(valid):   # it fails on every call alone too: the candidate's
            return failed[0], []
        return "ok", cases
    if doc.get("status") == "skipped":
        raise Skipped(doc.get("reason", ""))
    got = doc.get("cases") or []
    for j, i in enumerate(valid):
        if j < len(got):
            cases[i] = {k: got[j].get(k) for k in CASE_KEYS}
    return "ok", cases


def run_candidates(vs: list[KernelVersion], shapes: list[list[GemmShape]],
                   run_spec: Callable[[dict[str, Any]], dict[str, Any]], *, source: str,
                   min_time_ms: float, repeats: int, backend: str = "opencl",
                   together: bool = False
                   ) -> list[tuple[str, list[dict[str, Any] | None]]]:
    """Run each candidate ``vs[j]`` on its calls ``shapes[j]``; returns one ``(status,
    cases)`` per candidate, as :func:`run_cases` gives it. With ``together`` on OpenCL, and
    more than one candidate whose specs differ only in their build options and cases, all of
    them in one bench-gemm process (module docstring; each case with its candidate's
    ``options``: ``run_spec`` must run such a spec, as the runner does); else, or when that
    process fails as a whole, one :func:`run_cases` per candidate. Raises :class:`Skipped`
    when the device lacks what the version needs."""
    def alone() -> list[tuple[str, list[dict[str, Any] | None]]]:
        return [run_cases(v, sh, run_spec, source=source, min_time_ms=min_time_ms,
                          repeats=repeats, backend=backend) for v, sh in zip(vs, shapes)]
    if not together or backend != "opencl" or len(vs) < 2:
        return alone()
    out: list[list[dict[str, Any] | None]] = [[None] * len(sh) for sh in shapes]
    why = [""] * len(vs)
    plan: list[tuple[int, int]] = []   # (candidate, call) of each case of the process
    cases: list[dict[str, Any]] = []
    common = None
    for j, (v, sh) in enumerate(zip(vs, shapes)):
        for i, g in enumerate(sh):
            try:
                one = gemm_spec(v, [g], source=source, backend=backend,
                                min_time_ms=min_time_ms, repeats=repeats)
            except ValueError as e:   # a geometry the candidate cannot launch: that call
                why[j] = why[j] or _first_line(e)
                out[j][i] = _error_case(g, why[j])
                continue
            rest = {k: x for k, x in one.items() if k not in ("cases", "options")}
            if common is None:
                common = rest
            elif rest != common:   # not one program source and timing: each its own
                return alone()
            plan.append((j, i))
            cases.append(dict(one["cases"][0], options=one["options"]))
    planned = {j for j, _ in plan}
    status = ["ok" if j in planned else f"error: {why[j]}" for j in range(len(vs))]
    if cases:
        try:
            doc = run_spec(dict(common, options=cases[0]["options"], cases=cases))
        except PhonetrainError:
            return alone()
        if doc.get("status") == "skipped":
            raise Skipped(doc.get("reason", ""))
        got = doc.get("cases") or []
        for k, (j, i) in enumerate(plan):
            c = got[k] if k < len(got) else None
            if c is not None and c.get("build_failed"):
                status[j] = f"error: {c.get('error')}"
            elif c is not None:
                out[j][i] = {key: c.get(key) for key in CASE_KEYS}
    return [(st, out[j] if st == "ok" else []) for j, st in enumerate(status)]


def class_score(trial: dict[str, Any], idx: list[int], want_pass: int | None = None
                ) -> float | None:
    """The geometric mean GFLOPS of ``trial`` over the cases ``idx`` (one class's calls), or
    None when the trial failed any of them (or, with ``want_pass``, a case's figures come
    from another pass)."""
    if trial["status"] != "ok":
        return None
    cases = [trial["cases"][i] if i < len(trial["cases"]) else None for i in idx]
    if any(c is None or c.get("status") != "ok" or not (c.get("gflops") or 0) > 0 or
           (want_pass is not None and c.get("pass") != want_pass) for c in cases):
        return None
    return math.exp(sum(math.log(c["gflops"]) for c in cases) / len(cases))


def finalists(trials: list[dict[str, Any]], idx: list[int], k: int) -> list[int]:
    """The indices (in the space's order) of one class's finalists after the screening pass
    ``trials``: its ``k`` fastest candidates that passed on the class's cases ``idx``, and the
    defaults (index 0) when they passed."""
    scored = [(s, i) for i, t in enumerate(trials)
              if (s := class_score(t, idx)) is not None]
    top = {i for _, i in sorted(scored, key=lambda si: (-si[0], si[1]))[:k]}
    if any(i == 0 for _, i in scored):
        top.add(0)
    return sorted(top)


def second_pass(versions: list[KernelVersion], trials: list[dict[str, Any]],
                shapes: list[GemmShape], finals: dict[str, list[int]],
                groups: dict[str, list[int]],
                run_spec: Callable[[dict[str, Any]], dict[str, Any]], *, source: str,
                min_time_ms: float, repeats: int, backend: str = "opencl",
                together: bool = False) -> None:
    """Time each finalist again on the classes it is a finalist of (:func:`run_candidates`,
    the finalists in one process with ``together``) at ``min_time_ms`` x ``repeats``; its
    cases in ``trials``
    are replaced and marked ``pass`` 2. ``versions``: the candidates, in the order of
    ``trials``; ``finals``/``groups``: class -> finalist indices / case indices."""
    todo = []
    for ci in range(len(versions)):
        idx = sorted(i for cls, case_idx in groups.items() if ci in finals[cls]
                     for i in case_idx)
        if idx:
            todo.append((ci, idx))
    ran = run_candidates([versions[ci] for ci, _ in todo],
                         [[shapes[i] for i in idx] for _, idx in todo], run_spec,
                         source=source, min_time_ms=min_time_ms, repeats=repeats,
                         backend=backend, together=together)
    for (ci, idx), (status, cases) in zip(todo, ran):
        for j, i in enumerate(idx):
            c = cases[j] if cases else _error_case(shapes[i], status[len("error: "):])
            trials[ci]["cases"][i] = None if c is None else dict(c, **{"pass": 2})
