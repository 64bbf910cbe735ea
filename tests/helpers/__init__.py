"""Code shared by the test modules (not tests themselves): hand-built plans, kernel cases,
run folders, a real study, workflow workspaces and adb devices. Import it as ``helpers.<name>``;
``tests/`` is on ``sys.path`` through ``pythonpath`` in pyproject.toml."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"  # data files the tests read (real traces)
# The tests' host is shared: fixed iteration counts and no measurement judged unstable (the
# tests of that verdict set these overrides themselves).
STEADY = ("measure.ci_target=0", "measure.max_other_cpu_share=1",
          "measure.max_probe_slowdown=0")
