"""Fixtures shared across the test folders: one runner build per session (real cc, real
PoCL), the PoCL device, a real adb server with virtual devices, and a small real study.

Helper code lives in the ``helpers`` package (``tests/`` is on ``sys.path`` through
``pythonpath`` in pyproject.toml); fixtures used by one folder only live in that folder's
conftest.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import adbutils
import pytest

from helpers import compose_memo, tiers
from helpers.adb import connect_vdev, disconnect_vdev, free_port
from helpers.real_study import make_real_study
from helpers.shared import once_per_run
from helpers.workflow import seed_runner_cache
from phonetrain import runner as runner_api
from phonetrain.devices import toolchains
from phonetrain.results import provenance


@pytest.hookimpl(hookwrapper=True)
def pytest_collection_modifyitems(config, items):
    """Mark each test with its tier (helpers.tiers); then, once ``-m`` has deselected, run the
    costly tiers' files first and within a tier the files of ``tiers.LONGEST_FIRST`` first.

    With ``--dist loadfile`` a worker takes a whole file; files that run Snakemake take
    minutes, so they start first and the short files fill the gaps at the end (the longest
    processing time first), instead of one worker finishing a workflow file alone. A file's
    rank is its costliest selected test's tier, so under ``-m unit`` the long unit files lead.
    """
    for item in items:
        item.add_marker(getattr(pytest.mark, tiers.tier(item)))
    yield   # the other plugins' hooks: -m deselects, -p randomly shuffles
    rank = {t: i for i, t in enumerate(reversed(tiers.TIERS))}  # workflow, runner, unit
    longest = {f: i for i, f in enumerate(tiers.LONGEST_FIRST)}
    file_rank: dict[str, int] = {}
    for item in items:
        f = item.nodeid.split("::")[0]
        t = next(m.name for m in item.iter_markers() if m.name in rank)
        file_rank[f] = min(rank[t], file_rank.get(f, len(rank)))
    items.sort(key=lambda it: (file_rank[it.nodeid.split("::")[0]],
                               longest.get(it.nodeid.split("::")[0], len(longest))))


@pytest.fixture(autouse=True)
def unit_tests_start_no_process(request, monkeypatch):
    """A ``unit`` test may start no process: one that does fails here, naming what it
    started, so the tiers of helpers.tiers cannot drift from what the tests do."""
    if request.node.get_closest_marker("unit") is None:
        return

    tiers.refuse_processes(monkeypatch)


@pytest.fixture(autouse=True)
def compose_memo_of_this_process(request, monkeypatch):
    """Hydra compositions answered from this process's memo (helpers.compose_memo): the same
    conf files, overrides and environment values compose once per test process, and the
    same config file text is parsed as YAML once (OmegaConf.load). A test
    marked ``fresh_compose`` (its subject is composition itself) composes every time."""
    if request.node.get_closest_marker("fresh_compose") is not None:
        return
    from omegaconf import OmegaConf

    from phonetrain.config import compose
    monkeypatch.setattr(compose, "_compose", compose_memo.memoized(compose._compose))
    monkeypatch.setattr(OmegaConf, "load", compose_memo.memoized_load(OmegaConf.load))


@pytest.fixture(scope="session", autouse=True)
def pools_on_one_thread():
    """numpy's BLAS (threadpoolctl) and Arrow's CPU and I/O pools on one thread in each test
    process (the processes a test starts keep their own): the ``-n 2`` workers already keep
    both cores of a 2-core host busy, and the libraries' own threads beside them wait for
    work -- CPU time for no answer sooner (OpenBLAS's threads spin: the float64 reference
    checks took twice the CPU with them)."""
    import pyarrow as pa
    from threadpoolctl import threadpool_limits

    cpu, io = pa.cpu_count(), pa.io_thread_count()
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    try:
        with threadpool_limits(limits=1, user_api="blas"):
            yield
    finally:
        pa.set_cpu_count(cpu)
        pa.set_io_thread_count(io)


@pytest.fixture(scope="session", autouse=True)
def git_revision_read_once():
    """The project's git revision (results provenance) read before any test, so the test that
    happens to aggregate first is not the one that starts ``git`` (it is cached)."""
    provenance.git_rev()


@pytest.fixture(scope="session", autouse=True)
def private_lock_dir(tmp_path_factory):
    """Measurement locks of this session's own folder: a test never waits on (or is refused
    by) another user's or another suite's lock on this host's devices."""
    old = os.environ.get("PHONETRAIN_LOCK_DIR")
    os.environ["PHONETRAIN_LOCK_DIR"] = str(tmp_path_factory.mktemp("locks"))
    yield
    if old is None:
        os.environ.pop("PHONETRAIN_LOCK_DIR", None)
    else:
        os.environ["PHONETRAIN_LOCK_DIR"] = old


@pytest.fixture(autouse=True)
def private_probe_dir(tmp_path_factory, monkeypatch):
    """Each test its own machine probe record (phonetrain.stages.quiet): a probe reading
    taken while one test ran never becomes the quiet figure another test's run is judged
    against, and the user's own record is never touched."""
    monkeypatch.setenv("PHONETRAIN_PROBE_DIR", str(tmp_path_factory.mktemp("probe")))


@pytest.fixture(autouse=True)
def private_tuning_dir(tmp_path_factory, monkeypatch):
    """Each test its own machine tuning records (phonetrain.stages.tuning_records): a test
    that tunes measures, and never reuses what another test tuned or touches the user's."""
    monkeypatch.setenv("PHONETRAIN_TUNING_DIR", str(tmp_path_factory.mktemp("tuning")))


@pytest.fixture(scope="session")
def runner(tmp_path_factory, worker_id) -> Path:
    """The runner binary, compiled once per test run from src/runner with the default flags
    (or the binary named by $PHONETRAIN_TEST_RUNNER, e.g. a sanitizer build)."""
    if os.environ.get("PHONETRAIN_TEST_RUNNER"):
        return Path(os.environ["PHONETRAIN_TEST_RUNNER"])
    if toolchains.which_cc() is None:
        pytest.skip("no C compiler (cc) on this machine")
    return Path(once_per_run(tmp_path_factory, worker_id, "runner-build",
                             lambda d: str(toolchains.build_runner(d))))


@pytest.fixture
def seeded_results(tmp_path, runner) -> Path:
    """``tmp_path/results``, not made yet but for its runner compile cache, which holds the
    session's runner build (:func:`helpers.workflow.seed_runner_cache`): a ``phonetrain run``
    or a workflow into this results folder installs that binary instead of compiling the
    runner again (7-9 s of CPU each). For tests whose subject is not the runner's compile."""
    results = tmp_path / "results"
    seed_runner_cache(results, runner)
    return results


@pytest.fixture(scope="session")
def pocl(runner) -> runner_api.DeviceSelector:
    """Selector of the PoCL CPU device behind the system ICD loader (the embedded default)."""
    doc = runner_api.info(runner)
    names = [p["name"] for p in doc["platforms"]]
    if not any("portable" in n.lower() or "pocl" in n.lower() for n in names):
        pytest.skip(f"PoCL is not installed (platforms: {names}); apt install pocl-opencl-icd")
    return runner_api.DeviceSelector(platform="Portable Computing Language")


@pytest.fixture(scope="session")
def lavapipe(runner) -> runner_api.DeviceSelector:
    """Selector of Mesa lavapipe (``llvmpipe``: the CPU Vulkan driver, the Vulkan backend's
    embedded default), with glslc to compile the shaders for it; skips where the Vulkan
    loader, lavapipe or glslc is not installed (.ci/setup installs them)."""
    import ctypes.util
    import glob
    import shutil
    missing = [what for what, ok in (
        ("libvulkan1", ctypes.util.find_library("vulkan")),
        ("mesa-vulkan-drivers (lavapipe)", glob.glob("/usr/share/vulkan/icd.d/lvp_icd*.json")),
        ("glslc", shutil.which("glslc"))) if not ok]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (apt install them: .ci/setup)")
    return runner_api.DeviceSelector(vk_device="llvmpipe")


@pytest.fixture(scope="session")
def adb_server():
    """A fresh adb server (adbutils' bundled binary) on a private port;
    ANDROID_ADB_SERVER_PORT points at it."""
    port = free_port()
    adb = adbutils.adb_path()
    old = os.environ.get("ANDROID_ADB_SERVER_PORT")
    os.environ["ANDROID_ADB_SERVER_PORT"] = str(port)
    subprocess.run([adb, "-P", str(port), "start-server"], check=True, capture_output=True,
                   timeout=60)
    try:
        yield adbutils.AdbClient(host="127.0.0.1", port=port)
    finally:
        subprocess.run([adb, "-P", str(port), "kill-server"], capture_output=True, timeout=30)
        if old is None:
            os.environ.pop("ANDROID_ADB_SERVER_PORT", None)
        else:
            os.environ["ANDROID_ADB_SERVER_PORT"] = old


@pytest.fixture
def vdev(adb_server, tmp_path):
    """A connected virtual device with its sandbox under tmp_path/device."""
    vd = connect_vdev(adb_server, tmp_path / "device")
    yield vd
    disconnect_vdev(adb_server, vd)


@pytest.fixture(scope="session")
def real_study(tmp_path_factory, worker_id, runner) -> dict[str, list[Path]]:
    """The small real study of :mod:`helpers.real_study`, run once per test run (the runner
    build of ``runner`` reused); the aggregate's inputs (``runs``, ``bandwidth``, ``builds``).
    Read-only: copy what you change."""
    def build(folder: Path) -> dict[str, list[str]]:
        return {k: [str(p) for p in v] for k, v in make_real_study(folder, runner).items()}
    doc = once_per_run(tmp_path_factory, worker_id, "real-study", build)
    return {k: [Path(p) for p in v] for k, v in doc.items()}
