"""Thread counts follow the CPUs really available (src/runner/cpus.c,
phonetrain.devices.cpus): the affinity mask and the cgroup quota, the smaller, at least 1,
recorded in the run's conditions. Real runner under a real restricted affinity (taskset);
the quota through a planted cgroup tree under the runner's sysfs root (a real quota needs a
delegated cgroup this host does not give)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from phonetrain import runner as runner_api
from phonetrain.devices import cpus
from phonetrain.lowering import LowerSpec, write_bundle


def _bundle(tmp_path):
    spec = LowerSpec(model="mlp_16_16", batch_size=8, dataset="synthetic", warmup=1,
                     iterations=3, num_batches=2, backend="cpu")
    return write_bundle(spec, tmp_path, seed=0)


def _conditions(runner, tmp_path, launcher=(), sysfs_root=None, out="out"):
    r = runner_api.Runner.local_binary(runner, tmp_path, launcher=launcher)
    doc = r.run(_bundle(tmp_path).resolve(), tmp_path / out, sysfs_root=sysfs_root)
    return doc["threads"], doc["conditions"]


def _plant_quota(root: Path, quota_us: int, period_us: int) -> Path:
    """A cgroup tree under ``root`` (standing for /sys) that gives this process's own cgroup
    (v2 and v1 cpu paths of /proc/self/cgroup) a quota of quota_us / period_us CPUs."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, ctl, path = line.split(":", 2)
        if ctl and ("cpu" not in ctl or "cpuset" in ctl):
            continue
        d = root / "fs" / "cgroup" / ctl / path.lstrip("/")
        d.mkdir(parents=True, exist_ok=True)
        if ctl:   # v1
            (d / "cpu.cfs_quota_us").write_text(f"{quota_us}\n")
            (d / "cpu.cfs_period_us").write_text(f"{period_us}\n")
        else:     # v2
            (d / "cpu.max").write_text(f"{quota_us} {period_us}\n")
    return root


def test_threads_follow_a_restricted_affinity(runner, tmp_path):
    if shutil.which("taskset") is None:
        pytest.skip("taskset (util-linux) is not installed")
    mask = sorted(os.sched_getaffinity(0))
    if len(mask) < 2:
        pytest.skip("one CPU in this process's affinity mask: nothing to restrict")
    threads, c = _conditions(runner, tmp_path, launcher=["taskset", "-c", str(mask[0])])
    assert threads == c["omp_threads"] == c["cpus_affinity"] == c["cpus_usable"] == 1, c
    assert c["cpus_online"] == os.sysconf("SC_NPROCESSORS_ONLN")
    whole, w = _conditions(runner, tmp_path, out="whole")
    assert whole == w["cpus_affinity"] == len(mask) == w["cpus_usable"], w


def test_threads_follow_the_cgroup_quota(runner, tmp_path, monkeypatch):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU in this process's affinity mask: a quota changes nothing")
    root = _plant_quota(tmp_path / "sys", 50000, 100000)   # half a CPU
    threads, c = _conditions(runner, tmp_path, sysfs_root=str(root))
    assert c["cpu_quota_cpus"] == pytest.approx(0.5) and threads == c["cpus_usable"] == 1, c
    monkeypatch.setenv(cpus.SYSFS_ROOT_ENV, str(root))
    a = cpus.availability()
    assert (a.quota_cpus, a.usable, a.affinity) == (0.5, 1, c["cpus_affinity"])


def test_a_quota_above_the_mask_and_none_change_nothing(runner, tmp_path, monkeypatch):
    n = len(os.sched_getaffinity(0))
    root = _plant_quota(tmp_path / "sys", 100000 * (n + 2), 100000)
    threads, c = _conditions(runner, tmp_path, sysfs_root=str(root))
    assert c["cpu_quota_cpus"] == pytest.approx(n + 2) and threads == n
    empty = tmp_path / "nosys"
    empty.mkdir()
    threads, c = _conditions(runner, tmp_path, sysfs_root=str(empty), out="none")
    assert c["cpu_quota_cpus"] is None and threads == n
    monkeypatch.setenv(cpus.SYSFS_ROOT_ENV, str(empty))
    assert cpus.availability().quota_cpus is None and cpus.usable_cpus() == n


def test_the_cgroups_throttled_time_is_recorded(runner, tmp_path):
    """The runner reads the CPU controller's throttled time (v2 cpu.stat throttled_usec, v1
    throttled_time) of its cgroup path before and after measuring and records the increase
    (``cgroup_throttled_s``, what the measurement verdict judges a quota by); null where no
    cgroup records it. A planted file does not change during the run: an increase of 0."""
    root = _plant_quota(tmp_path / "sys", 50000, 100000)
    for d in (root / "fs" / "cgroup").rglob("*"):
        if (d / "cpu.max").is_file():
            (d / "cpu.stat").write_text("usage_usec 10\nnr_throttled 3\nthrottled_usec 2500000\n")
        elif (d / "cpu.cfs_quota_us").is_file():
            (d / "cpu.stat").write_text("nr_periods 9\nnr_throttled 3\nthrottled_time 2500000000\n")
    _, c = _conditions(runner, tmp_path, sysfs_root=str(root))
    assert c["cgroup_throttled_s"] == 0.0, c
    empty = tmp_path / "nosys"
    empty.mkdir()
    _, c = _conditions(runner, tmp_path, sysfs_root=str(empty), out="none")
    assert c["cgroup_throttled_s"] is None, c
