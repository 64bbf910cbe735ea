"""Two workflows whose device lock folders differ (two submit hosts, two $PHONETRAIN_LOCK_DIR)
measure one virtual phone: the lock held on the phone serializes them (their locked spans and
measured spans never overlap) and the one that waits says whom for. The first holds the phone
in its cool-down (the phone's sensor reads hot) until the second is seen waiting. Real
Snakemake, real adb server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from helpers.adb import connect_vdev, disconnect_vdev
from workflow.test_adb_workflow import SMALL, fake_sysfs, snakemake, workspace

LOCKED = re.compile(r"device 'vphone' locked from ([0-9.]+) to ([0-9.]+) s")
# two CPU runs each (the lock does not depend on the backend: no kernel build to wait for)
MODELS = ("mlp_16_16", "mlp_16_16_16_16")
RUNS = [f"results/runs/vphone/{m}.cpu.none/run.json" for m in MODELS]
SWEEP = ["sweep.devices=[vphone]", "sweep.backends=[cpu]", f"sweep.models=[{','.join(MODELS)}]"]
HOT, COOL = "60000\n", "38500\n"   # the phone's sensor (millidegrees C), either side of 50 C


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


def start(ws: Path, over: list[str], err: Path) -> subprocess.Popen:
    """Snakemake making ``RUNS`` in ``ws``, its stderr written to ``err`` (read while it runs)."""
    env = dict(os.environ, PHONETRAIN_LOCK_DIR=str(ws / "locks"))   # each its own folder
    with err.open("w") as sink:
        return subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "2", *RUNS,
                                 "--config", f"overrides={json.dumps(over)}"],
                                cwd=ws, env=env, stdout=subprocess.DEVNULL, stderr=sink,
                                text=True)


def holder_job(holder: Path) -> str:
    """The job named by the phone's lock holder note ("" while there is none, or while it is
    being written)."""
    try:
        return json.loads(holder.read_text()).get("job") or ""
    except (OSError, ValueError, AttributeError):
        return ""


def set_temp(sensor: Path, text: str) -> None:
    """Replace the phone's sensor file whole: a reading never sees it half written."""
    tmp = sensor.with_name(sensor.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(sensor)


def wait_for(what, procs: list[subprocess.Popen], why: str, deadline_s: float = 300) -> None:
    """Poll ``what()`` until true while every one of ``procs`` still runs (the deadline only
    catches a hang)."""
    end = time.monotonic() + deadline_s
    while not what():
        assert all(p.poll() is None for p in procs) and time.monotonic() < end, why
        time.sleep(0.1)


def test_two_workflows_with_other_lock_folders_take_turns_on_one_phone(adb_server, tmp_path,
                                                                       runner):
    sysfs = fake_sysfs(tmp_path / "sys")
    temp = sysfs / "class/thermal/thermal_zone0/temp"
    vd = connect_vdev(adb_server, tmp_path / "phone", sysfs_root=sysfs)
    procs: list[subprocess.Popen] = []
    try:
        a_dir, b_dir = tmp_path / "a", tmp_path / "b"
        a_dir.mkdir()
        b_dir.mkdir()
        a = workspace(a_dir, {"vphone": vd.serial}, runner)
        b = workspace(b_dir, {"vphone": vd.serial}, runner)
        # a's train waits for the hot phone to cool (SMALL: measure.cooldown_threshold_c=50)
        # under the phone's lock for as long as it takes: b starts while a holds the lock
        over_a = SMALL + SWEEP + ["measure.cooldown_limit_s=600"]
        over_b = SMALL + SWEEP
        for ws, over in ((a, over_a), (b, over_b)):   # all but the runs, one after the other
            p = snakemake(ws, over, "--until", "deploy")
            assert p.returncode == 0, p.stderr[-4000:]
        set_temp(temp, HOT)
        err_a, err_b = tmp_path / "a.err", tmp_path / "b.err"
        procs.append(start(a, over_a, err_a))
        holder = vd.root / "phonetrain-lock" / "holder"
        wait_for(lambda: holder_job(holder).startswith("train"), procs,
                 "a's train never held the phone")
        procs.append(start(b, over_b, err_b))
        wait_for(lambda: "waiting for device 'vphone'" in err_b.read_text(), procs,
                 "b never waited for the phone")
        set_temp(temp, COOL)   # a measures, then b takes the phone
        first, second = procs
        first.wait(timeout=600)
        second.wait(timeout=600)
        assert first.returncode == 0, err_a.read_text()[-4000:]
        assert second.returncode == 0, err_b.read_text()[-4000:]
        # b waited and said for whom: a's train job, with a's workflow folder
        waits = [line for line in err_b.read_text().splitlines()
                 if "waiting for device 'vphone': held by train" in line]
        assert waits and f"workflow in {a}" in waits[0], err_b.read_text()[-4000:]
        spans_a, spans_b = locked_spans(a), locked_spans(b)
        assert len(spans_a) >= 2 and len(spans_b) >= 2
        assert overlaps(spans_a, spans_b) == []
        assert len(measured_spans(a)) == len(measured_spans(b)) == 2
        assert overlaps(measured_spans(a), measured_spans(b)) == []
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        disconnect_vdev(adb_server, vd)
