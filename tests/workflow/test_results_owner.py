"""One owner per results folder: while a workflow executes jobs into a results folder, a
second one on the same folder (here from another working folder, where Snakemake's own lock
does not reach) is refused at its start with the holder named, and the first completes; a
dry run takes no lock."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from helpers.workflow import SNAKEMAKE, TINY, env, make_workspace, snakemake
from phonetrain.devices.local import LocalTransport

SMALL = TINY + ["sweep.models=[mlp_16_16]", "sweep.backends=[cpu]"]


def _wait_for_owner(note: Path, proc: subprocess.Popen, deadline_s: float = 900) -> dict:
    """The owner note once ``proc`` wrote it (polled; the deadline only catches a hang)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if note.exists():
            doc = json.loads(note.read_text())
            if doc["pid"] == proc.pid:
                return doc
        assert proc.poll() is None, proc.communicate()[0][-5000:]
        time.sleep(0.2)
    raise AssertionError(f"{note} not written by pid {proc.pid}")


def test_second_workflow_on_one_results_folder_is_refused(tmp_path: Path, monkeypatch,
                                                          runner):
    ws = make_workspace(tmp_path / "ws", runner)
    other = make_workspace(tmp_path / "other")
    monkeypatch.setenv("PHONETRAIN_LOCK_DIR", str(ws / "locks"))  # the workflows' device locks
    device = LocalTransport("host", tmp_path / "stage").lock()
    cmd = [str(SNAKEMAKE), "--cores", "1", "all", "--config", f"overrides={json.dumps(SMALL)}"]
    with device:  # the first workflow's first measurement waits here: it cannot end early
        first = subprocess.Popen(cmd, cwd=ws, env=env(ws), stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
        try:
            doc = _wait_for_owner(ws / "results" / "owner.json", first)
            assert doc["cwd"] == str(ws) and doc["host"]
            second = snakemake(other, "all", overrides=SMALL + [f"results_dir={ws / 'results'}"],
                               timeout=900)
            assert second.returncode != 0
            err = second.stderr
            assert f"results folder {ws / 'results'} is in use by another workflow" in err, err
            assert f"pid {first.pid} on host {doc['host']}, working folder {ws}" in err, err
            assert not (other / "results").exists()
            # a dry run takes no owner lock. While the first waits at the device lock, the job
            # that waits may be the one writing a plan.json, which Snakemake's own check refuses
            # as incomplete; that check runs after the Snakefile's owner check, so either way
            # "in use" must not appear
            dry = snakemake(ws, "--dry-run", "all", overrides=SMALL, timeout=900)
            said = dry.stdout + dry.stderr
            assert "in use" not in said, said[-3000:]
            assert dry.returncode == 0 or "Incomplete files:" in said, said[-3000:]
            assert first.poll() is None  # still waiting on the device: it really was running
        except BaseException:
            first.kill()
            raise
    out, _ = first.communicate(timeout=1800)
    assert first.returncode == 0, out[-5000:]
    assert (ws / "results" / "report" / "report.html").is_file()
    again = snakemake(other, "all", overrides=SMALL + [f"results_dir={ws / 'results'}"],
                      timeout=1800)  # the first has ended: its lock went with it
    assert "in use by another workflow" not in again.stderr, again.stderr[-3000:]


def test_a_run_snakemake_refuses_takes_nothing(tmp_path: Path):
    """`snakemake all` without --cores (or --jobs) is refused by Snakemake after it parsed
    the workflow: the parse takes no owner lock, writes no owner note, moves nothing."""
    ws = make_workspace(tmp_path / "ws")
    p = subprocess.run([str(SNAKEMAKE), "all", "--config", f"overrides={json.dumps(SMALL)}"],
                       cwd=ws, env=env(ws), capture_output=True, text=True, timeout=900)
    assert p.returncode != 0 and "cores have to be specified" in p.stderr, p.stderr[-3000:]
    assert not (ws / "results").exists(), sorted(p.name for p in (ws / "results").iterdir())
