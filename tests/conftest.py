"""Shared fixtures of the suite: one runner build per session (real cc, real PoCL)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # helper modules beside the tests

from phonetrain import runner as runner_api  # noqa: E402
from phonetrain.devices import toolchains  # noqa: E402


@pytest.fixture(scope="session")
def runner(tmp_path_factory) -> Path:
    """The runner binary, compiled once per session from src/runner with the default flags
    (or the binary named by $PHONETRAIN_TEST_RUNNER, e.g. a sanitizer build)."""
    if os.environ.get("PHONETRAIN_TEST_RUNNER"):
        return Path(os.environ["PHONETRAIN_TEST_RUNNER"])
    if toolchains.which_cc() is None:
        pytest.skip("no C compiler (cc) on this machine")
    return toolchains.build_runner(tmp_path_factory.mktemp("runner-build"))


@pytest.fixture(scope="session")
def pocl(runner) -> runner_api.DeviceSelector:
    """Selector of the PoCL CPU device behind the system ICD loader (the embedded default)."""
    doc = runner_api.info(runner)
    names = [p["name"] for p in doc["platforms"]]
    if not any("portable" in n.lower() or "pocl" in n.lower() for n in names):
        pytest.skip(f"PoCL is not installed (platforms: {names}); apt install pocl-opencl-icd")
    return runner_api.DeviceSelector(platform="Portable Computing Language")
