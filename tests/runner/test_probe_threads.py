"""No thread of the calibration probe outlives it beside an OpenCL run: under
OMP_WAIT_POLICY=ACTIVE the probe's OpenMP workers would spin through the measured iterations on
the cores PoCL's own threads need. Real runner on PoCL through `phonetrain run`; the runner's
threads are counted from /proc at each progress line, warm-up (before the probe) against the
measured iterations (after it; the last warm-up line may be read once the probe has begun),
with 2 OpenMP threads asked for (one worker to outlive it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO

RUN = ["run", "model=lenet5", "device=host", "backend=opencl", "kernel=baseline",
       "measure.warmup=4", "measure.iterations=12", "measure.ci_target=0", "measure.repeats=1",
       "measure.threads=2", "measure.max_probe_slowdown=0", "measure.max_other_cpu_share=1",
       "measure.progress=true", "dataset.num_batches=2"]


def _stat(pid: str) -> tuple[str, int] | None:
    """(comm, ppid) of a process, None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.index("(") + 1:text.rindex(")")], int(text.rsplit(")", 1)[1].split()[1])


def _runner_threads(ancestor: int) -> int | None:
    """Threads of the `runner` process descending from ``ancestor`` (None: not running)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        st = _stat(pid)
        if st is None or st[0] != "runner":
            continue
        up = st[1]
        while up > 1 and up != ancestor:
            up = (_stat(str(up)) or ("", 1))[1]
        if up == ancestor:
            try:
                return len(os.listdir(f"/proc/{pid}/task"))
            except OSError:
                return None
    return None


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_the_probe_leaves_no_openmp_thread_beside_an_opencl_run(tmp_path: Path, pocl):
    cmd = [sys.executable, "-m", "phonetrain.cli", *RUN, f"results_dir={tmp_path / 'r'}"]
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    p = subprocess.Popen(cmd, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True,
                         stdout=subprocess.DEVNULL)
    warm, measured, lines = [], [], []
    for line in p.stderr:
        lines.append(line)
        if line.startswith("iteration "):
            n = _runner_threads(p.pid)
            if n is not None:
                (warm if "(warm-up)" in line else measured).append(n)
    assert p.wait() == 0, "".join(lines[-20:])
    assert len(warm) >= 2 and measured, "".join(lines[-20:])
    assert max(measured) <= max(warm[:-1]), (warm, measured)
