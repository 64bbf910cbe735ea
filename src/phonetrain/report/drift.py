"""The host's own drift between two studies, gauged on the subjects nothing changed for.

One study's interval describes that study: two studies of identical sources on one host can
differ by more than either interval (the host's other tenants, its clock and cache state
between the two). A comparison of two studies therefore takes the subjects with no changed
source file, hash, tuning choice, setting or device -- the *controls* -- as the measure of
what the host alone did, as a difference-in-differences design does with its control group
(Angrist and Pischke, "Mostly Harmless Econometrics", 2009, ch. 5): per kind (run, GEMM
shape) and device, the band from the smallest to the largest after / before ratio of the
usable controls whose intervals are narrow (:data:`MAX_CONTROL_SPREAD`). A subject that changed is called faster or slower only when its ratio lies
beyond that band at the far ends of both intervals; a control is never called faster or
slower (nothing but the host changed for it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Iterable

import phonetrain.report.wording as w


@dataclass(frozen=True)
class Drift:
    """The after / before ratios (dimensionless, of times in ms) of the usable controls of one
    kind and device: ``low``..``high`` over ``controls`` subjects of ``kind`` (run, gemm)."""

    low: float
    high: float
    controls: int
    kind: str

    def text(self) -> str:
        """E.g. ``unchanged runs moved 0.62x-1.02x (20 runs)``."""
        noun = {"run": "run", "gemm": "GEMM shape"}.get(self.kind, self.kind)
        plural = noun + ("s" if self.controls != 1 else "")
        return (f"unchanged {noun}s moved {w.times(self.low)}-{w.times(self.high)} "
                f"({self.controls} {plural})")


MAX_CONTROL_SPREAD = 1.5
"""A control whose interval's high end is more than this many times its low end (on either
side) is left out of the band: its own noise, not the host's drift, would set the band's
ends (a GEMM shape measured 0.47-3.65 ms once widened a band to 0.097x-42.5x)."""


def control_ratio(before: w.Side, after: w.Side) -> float | None:
    """``after.value / before.value`` when both sides are usable (``ok``) with an interval no
    wider than :data:`MAX_CONTROL_SPREAD` and the same settings
    (:func:`phonetrain.report.wording.judge` would compare them), else None: an unstable,
    unmeasured or noisy control says nothing about the host's drift."""
    if not (before.status == after.status == w.USABLE and before.has_interval
            and after.has_interval and before.value > 0):
        return None
    if any(not s.low > 0 or s.high / s.low > MAX_CONTROL_SPREAD for s in (before, after)):
        return None
    if w.judge(before, after).reason.startswith("settings differ"):
        return None
    return after.value / before.value


def bands(controls: Iterable[tuple[Hashable, str, w.Side, w.Side]]) -> dict[Hashable, Drift]:
    """Takes ``(group, kind, before, after)`` for every unchanged subject (``group`` e.g. the
    kind and device); returns each group's :class:`Drift` over its usable controls (groups
    without one are left out)."""
    ratios: dict[Hashable, tuple[str, list[float]]] = {}
    for group, kind, before, after in controls:
        q = control_ratio(before, after)
        if q is not None:
            ratios.setdefault(group, (kind, []))[1].append(q)
    return {g: Drift(min(qs), max(qs), len(qs), kind) for g, (kind, qs) in ratios.items()}


def judge(before: w.Side, after: w.Side, *, unchanged: bool,
          drift: Drift | None) -> w.Verdict:
    """The verdict from ``before`` to ``after`` (times, lower is better) of two studies.

    :func:`phonetrain.report.wording.judge` first; a difference it states stands only when
    the subject changed and, where the host's ``drift`` is known, the ratio of the far ends
    of the intervals (after's low end over before's high end for ``slower``, after's high
    end over before's low end for ``faster``) lies beyond the drift band. Otherwise
    ``cannot tell`` with the reason: ``nothing changed but the host`` or ``within the host's
    drift``. A changed subject without a drift band (no usable control of its kind and
    device) keeps the interval verdict, its reason saying so."""
    v = w.judge(before, after)
    if not v.stated:
        return v
    host = f": {drift.text()}" if drift else ""
    if unchanged:
        return w.Verdict(w.CANNOT_TELL, "nothing changed but the host" + host)
    if drift is None:
        note = "host drift not gauged: nothing unchanged measured on both sides"
        return w.Verdict(v.word, f"{v.reason}; {note}" if v.reason else note, v.contended)
    beyond = (after.low / before.high > drift.high if v.word == "slower"
              else after.high / before.low < drift.low)
    return v if beyond else w.Verdict(w.CANNOT_TELL, "within the host's drift" + host)
