"""Where a job process spends its time: the spans it waited (a device lock, a cool-down) and
the runner processes it started, each recorded as it ends in :data:`SPANS` (kind, what, from,
to: Unix seconds), which the job's log lists (:mod:`phonetrain.stages.job`) and the study's
cost reads back (:mod:`phonetrain.stages.cost`).

Kinds: :data:`WAIT` (the job could not work: ``device 'host' lock``, ``cool-down``),
:data:`MEASURE` (one runner process that measures, ``what`` its mode:
:data:`phonetrain.runner.MEASURING_MODES`) and :data:`RUNNER` (one that does not, e.g. a
kernel build). Standard library only, so every layer may record into it.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator, NamedTuple

WAIT = "wait"
MEASURE = "measure"
RUNNER = "runner"


class Span(NamedTuple):
    kind: str       # WAIT, MEASURE or RUNNER
    what: str       # e.g. "cool-down", "device 'host' lock", or a runner mode
    from_s: float   # Unix seconds
    to_s: float

    def line(self) -> str:
        """The span as one job-log line: ``<kind> <what> from <from> to <to> s (Unix time)``."""
        return f"{self.kind} {self.what} from {self.from_s:.3f} to {self.to_s:.3f} s (Unix time)"


SPANS: list[Span] = []


@contextmanager
def span(kind: str, what: str) -> Iterator[None]:
    """Record the time spent inside the ``with`` block (also when it raises)."""
    t0 = time.time()
    try:
        yield
    finally:
        SPANS.append(Span(kind, what, t0, time.time()))


def wait(what: str, seconds: float) -> None:
    """Sleep ``seconds`` (a fixed cool-down), recorded as a :data:`WAIT` span."""
    with span(WAIT, what):
        time.sleep(seconds)
