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
                min_time_ms: float, repeats: int, backend: str = "opencl") -> None:
    """Time each finalist again on the classes it is a finalist of (one process per
    candidate, :func:`run_cases`) at ``min_time_ms`` x ``repeats``; its cases in ``trials``
    are replaced and marked ``pass`` 2. ``versions``: the candidates, in the order of
    ``trials``; ``finals``/``groups``: class -> finalist indices / case indices."""
    for ci, v in enumerate(versions):
        idx = sorted(i for cls, case_idx in groups.items() if ci in finals[cls]
                     for i in case_idx)
        if not idx:
            continue
        status, cases = run_cases(v, [shapes[i] for i in idx], run_spec, source=source,
                                  min_time_ms=min_time_ms, repeats=repeats, backend=backend)
        for j, i in enumerate(idx):
            c = cases[j] if cases else _error_case(shapes[i], status[len("error: "):])
            trials[ci]["cases"][i] = None if c is None else dict(c, **{"pass": 2})
