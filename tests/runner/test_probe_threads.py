"""No thread of the calibration probe outlives it beside an OpenCL run: under
OMP_WAIT_POLICY=ACTIVE the probe's OpenMP workers would spin through the measured iterations on
the cores PoCL's own threads need. Real runner on PoCL through `phonetrain run`, 2 OpenMP threads
asked for (one worker to outlive the probe). The runner's threads are counted from /proc when a
progress line arrives, and a count is kept only if it is known where the runner was while it
was taken: no later output had arrived by the time the count was done, so the runner was inside
the iteration after that line. The last warm-up line (the probe follows it) and the last
measured line (the closing probe follows it) are never used, so the test holds however late the
reader wakes on a busy host."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO

WARMUP, ITERATIONS = 8, 24
RUN = ["run", "model=lenet5", "device=host", "backend=opencl", "kernel=baseline",
       f"measure.warmup={WARMUP}", f"measure.iterations={ITERATIONS}", "measure.ci_target=0",
       "measure.repeats=1", "measure.threads=2", "measure.max_probe_slowdown=0",
       "measure.max_other_cpu_share=1", "measure.progress=true", "dataset.num_batches=2"]


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


def _iteration(line: bytes) -> int | None:
    """The 1-based iteration number of a progress line, None for other lines."""
    if not line.startswith(b"iteration "):
        return None
    return int(line.split()[1].split(b"/")[0])


def _counts_by_phase(p: subprocess.Popen) -> tuple[list[int], list[int], bytes]:
    """Thread counts taken inside a warm-up iteration and inside a measured iteration (neither
    the probe nor the closing probe), and everything the runner wrote to stderr."""
    fd, pending, text = p.stderr.fileno(), b"", b""
    warm, measured = [], []
    more = select.poll()   # poll, not select: a long-lived pytest worker may hold fds >= 1024
    more.register(fd, select.POLLIN)
    while chunk := os.read(fd, 65536):
        text += chunk
        *lines, pending = (pending + chunk).split(b"\n")
        if not lines or pending:
            continue   # mid-line: the runner is already past the last full line
        n = _iteration(lines[-1])
        if n is None or n in (WARMUP, WARMUP + ITERATIONS):
            continue
        count = _runner_threads(p.pid)
        if count is None or more.poll(0):
            continue   # more output arrived while counting: the runner moved on
        (warm if n < WARMUP else measured).append(count)
    return warm, measured, text


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_the_probe_leaves_no_openmp_thread_beside_an_opencl_run(seeded_results: Path, pocl):
    cmd = [sys.executable, "-m", "phonetrain.cli", *RUN, f"results_dir={seeded_results}"]
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    p = subprocess.Popen(cmd, cwd=REPO, env=env, stderr=subprocess.PIPE,
                         stdout=subprocess.DEVNULL)
    warm, measured, text = _counts_by_phase(p)
    tail = text.decode(errors="replace")[-2000:]
    assert p.wait() == 0, tail
    assert warm and measured, (warm, measured, tail)
    assert max(measured) <= max(warm), (warm, measured)
