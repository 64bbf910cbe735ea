"""The jobs of a finished workflow as time spans, from their logs (phonetrain.stages.job
writes ``<stage>: ok in S s (from START to END s, Unix time)``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SPAN = re.compile(r": ok in [0-9.]+ s \(from ([0-9.]+) to ([0-9.]+) s, Unix time\)")
MEASURING = {"train", "gemm", "tune", "tune_squares", "bandwidth", "peaks"}


@dataclass(frozen=True)
class Span:
    rule: str
    device: str | None   # the device of a rule with a {device} wildcard
    log: str
    start_s: float
    end_s: float

    def overlaps(self, other: Span) -> bool:
        return self.start_s < other.end_s and other.start_s < self.end_s


DEVICE_RULES = MEASURING | {"build_runner", "build_kernels", "deploy", "perfetto"}


def spans(results: Path) -> list[Span]:
    """One span per job log under ``results/logs`` that records its times."""
    out = []
    for log in sorted((results / "logs").rglob("*.log")):
        m = SPAN.search(log.read_text())
        if not m:
            continue
        parts = log.relative_to(results / "logs").parts
        rule = parts[0]
        device = parts[1] if rule in DEVICE_RULES and len(parts) > 2 else \
            log.stem if rule in DEVICE_RULES else None
        out.append(Span(rule, device, str(log), float(m.group(1)), float(m.group(2))))
    return out


def overlapping(a: list[Span], b: list[Span]) -> list[tuple[str, str]]:
    """Pairs (log of a, log of b) of distinct jobs whose spans overlap."""
    return [(x.log, y.log) for x in a for y in b if x.log != y.log and x.overlaps(y)]
