"""The CPUs this process may really use, by the rule the runner follows (src/runner/cpus.c):
the affinity mask (``os.sched_getaffinity``) and the cgroup CPU quota (v2 ``cpu.max``, v1
``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``, the tightest of the process's cgroup and its
ancestors), the smaller of them, at least 1. Every Python thread-count decision takes
:func:`usable_cpus` instead of ``os.cpu_count()`` (which counts CPUs the process may not use).

The cgroup files are read under ``$PHONETRAIN_SYSFS_ROOT`` (default ``/sys``), the folder the
runner also reads as ``/sys``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

SYSFS_ROOT_ENV = "PHONETRAIN_SYSFS_ROOT"


@dataclass(frozen=True)
class CpuAvailability:
    """``online``: CPUs online; ``affinity``: CPUs in the affinity mask; ``quota_cpus``: the
    cgroup quota in CPUs (None: no quota); ``usable``: min(affinity, floor(quota)), >= 1."""

    online: int
    affinity: int
    quota_cpus: float | None
    usable: int


def _folder_quota(d: Path) -> float | None:
    """Quota in CPUs set by one cgroup folder, or None."""
    try:
        quota, period = (d / "cpu.max").read_text().split()[:2]
        return None if quota == "max" or float(period) <= 0 else float(quota) / float(period)
    except (OSError, ValueError):
        pass
    try:
        quota = float((d / "cpu.cfs_quota_us").read_text())
        period = float((d / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


def _path_quota(mount: Path, cgroup: str) -> float | None:
    """The tightest quota of ``cgroup`` and its ancestors under one hierarchy's mount."""
    parts = [p for p in cgroup.split("/") if p]
    found = [q for i in range(len(parts), -1, -1)
             if (q := _folder_quota(mount.joinpath(*parts[:i]))) is not None]
    return min(found) if found else None


def cgroup_quota_cpus(proc_cgroup: str = "/proc/self/cgroup") -> float | None:
    """The cgroup CPU quota of this process in CPUs (cgroups(7): ``0::/path`` for v2 under
    ``<root>/fs/cgroup``, ``N:cpu,cpuacct:/path`` for v1 under ``<root>/fs/cgroup/<controllers>``),
    or None when none applies or the files are unreadable."""
    root = Path(os.environ.get(SYSFS_ROOT_ENV) or "/sys") / "fs" / "cgroup"
    try:
        lines = Path(proc_cgroup).read_text().splitlines()
    except OSError:
        return None
    found = []
    for line in lines:
        _, ctl, cgroup = (line.split(":", 2) + ["", ""])[:3]
        if not ctl:
            mounts = [root]
        elif "cpu" in ctl and "cpuset" not in ctl:
            mounts = [root / ctl, root / "cpu", root / "cpu,cpuacct"]
        else:
            continue
        for m in mounts:
            if (q := _path_quota(m, cgroup)) is not None:
                found.append(q)
                break
    return min(found) if found else None


def availability() -> CpuAvailability:
    """Online CPUs, the affinity mask, the quota and the usable count, read now."""
    online = os.cpu_count() or 1
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else online
    quota = cgroup_quota_cpus()
    usable = affinity if quota is None else min(affinity, math.floor(quota))
    return CpuAvailability(online, affinity, quota, max(1, usable))


def usable_cpus() -> int:
    """The number of CPUs this process may really use (:func:`availability`)."""
    return availability().usable
