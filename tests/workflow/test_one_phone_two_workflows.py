"""Two workflows whose device lock folders differ (two submit hosts, two $PHONETRAIN_LOCK_DIR)
measure one virtual phone: the lock held on the phone serializes them (their locked spans and
measured spans never overlap) and the one that waits says whom for. Real Snakemake, real adb
server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from helpers.adb import connect_vdev, disconnect_vdev
from workflow.test_adb_workflow import SMALL, snakemake, workspace

LOCKED = re.compile(r"device 'vphone' locked from ([0-9.]+) to ([0-9.]+) s")
RUNS = [f"results/runs/vphone/mlp_16_16.{b}/run.json" for b in ("cpu.none", "opencl.baseline")]


def locked_spans(ws: Path) -> list[tuple[float, float, str]]:
    """(from, to, log) of every hold of the phone's lock its job logs record."""
    return [(float(m.group(1)), float(m.group(2)), str(log))
            for log in (ws / "results" / "logs").rglob("*.log")
            for m in LOCKED.finditer(log.read_text())]


def measured_spans(ws: Path) -> list[tuple[float, float, str]]:
    out = []
    for s in (ws / "results" / "runs" / "vphone").glob("*/schedule.json"):
        doc = json.loads(s.read_text())
        out.append((doc["measured_from_s"], doc["measured_to_s"], str(s)))
    return out


def overlaps(a, b) -> list:
    return [(x[2], y[2]) for x in a for y in b if x[0] < y[1] and y[0] < x[1]]


def start(ws: Path, over: list[str]) -> subprocess.Popen:
    env = dict(os.environ, PHONETRAIN_LOCK_DIR=str(ws / "locks"))   # each its own folder
    return subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "2", *RUNS,
                             "--config", f"overrides={json.dumps(over)}"],
                            cwd=ws, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def test_two_workflows_with_other_lock_folders_take_turns_on_one_phone(adb_server, tmp_path):
    vd = connect_vdev(adb_server, tmp_path / "phone")
    try:
        a_dir, b_dir = tmp_path / "a", tmp_path / "b"
        a_dir.mkdir()
        b_dir.mkdir()
        a, b = workspace(a_dir, {"vphone": vd.serial}), workspace(b_dir, {"vphone": vd.serial})
        # a's runs hold the phone for their 8 s cool-down; b starts while a holds it
        over_a = SMALL + ["sweep.devices=[vphone]", "measure.cooldown_s=8"]
        over_b = SMALL + ["sweep.devices=[vphone]", "measure.cooldown_s=1"]
        for ws, over in ((a, over_a), (b, over_b)):   # all but the runs, one after the other
            p = snakemake(ws, over, "--until", "deploy")
            assert p.returncode == 0, p.stderr[-4000:]
        first = start(a, over_a)
        holder = vd.root / "phonetrain-lock" / "holder"
        deadline = time.monotonic() + 300
        while not (holder.exists() and holder.read_text().startswith('{"host"')
                   and json.loads(holder.read_text())["job"].startswith("train")):
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.1)
        second = start(b, over_b)
        out_a, err_a = first.communicate(timeout=600)
        out_b, err_b = second.communicate(timeout=600)
        assert first.returncode == 0, err_a[-4000:]
        assert second.returncode == 0, err_b[-4000:]
        # b waited and said for whom: a's train job, with a's workflow folder
        waits = [line for line in err_b.splitlines()
                 if "waiting for device 'vphone': held by train" in line]
        assert waits and f"workflow in {a}" in waits[0], err_b[-4000:]
        spans_a, spans_b = locked_spans(a), locked_spans(b)
        assert len(spans_a) >= 2 and len(spans_b) >= 2
        assert overlaps(spans_a, spans_b) == []
        assert len(measured_spans(a)) == len(measured_spans(b)) == 2
        assert overlaps(measured_spans(a), measured_spans(b)) == []
    finally:
        disconnect_vdev(adb_server, vd)
