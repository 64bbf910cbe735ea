"""The results folder's owner lock (phonetrain.results.owner): the holder is named to a
second taker, the lock goes with its process however that ends, and the commands that move
run folders aside (check, refresh) wait for no one: they refuse while a workflow owns it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from phonetrain import layout
from phonetrain.cli import main
from phonetrain.layout import Layout
from phonetrain.results import owner

HOLD = """import sys
from phonetrain.layout import Layout
from phonetrain.results import owner
lock = owner.take(Layout(sys.argv[1]))
print("held", flush=True)
sys.stdin.read()
"""


def test_holder_named_and_lock_freed_by_a_killed_process(tmp_path: Path):
    L = Layout(str(tmp_path / "results"))
    p = subprocess.Popen([sys.executable, "-c", HOLD, L.root], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert p.stdout.readline().strip() == "held"
        with pytest.raises(owner.ResultsFolderBusy) as e:
            owner.take(L)
        msg = str(e.value)
        assert f"results folder {L.root} is in use by another workflow: pid {p.pid}" in msg
        assert f"working folder {tmp_path}" in msg and "started " in msg, msg
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    lock = owner.take(L)  # the kernel released the killed holder's lock
    assert json.loads(Path(L.owner_note()).read_text())["pid"] == os.getpid()
    lock.release()


def test_refresh_refuses_while_the_folder_is_owned(tmp_path: Path):
    L = Layout(str(tmp_path / "results"))
    run = Path(L.run_dir("host", "mlp_16_16.cpu.none"))
    run.mkdir(parents=True)
    (run / layout.RUN).write_text("{}")
    lock = owner.take(L)
    try:
        res = CliRunner().invoke(main, ["refresh", "host/mlp_16_16.cpu.none",
                                        "--results", L.root])
        assert res.exit_code != 0 and "in use by another workflow" in res.output, res.output
        assert (run / layout.RUN).exists()  # nothing moved
    finally:
        lock.release()
    res = CliRunner().invoke(main, ["refresh", "host/mlp_16_16.cpu.none", "--results", L.root])
    assert res.exit_code == 0 and not run.exists(), res.output


def test_note_of_a_former_owner_is_not_named(tmp_path: Path):
    L = Layout(str(tmp_path / "results"))
    owner.take(L).release()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    note = json.loads(Path(L.owner_note()).read_text())
    Path(L.owner_note()).write_text(json.dumps({**note, "pid": int(gone)}))
    assert owner.holder(L) == "a process that has not recorded itself yet"
    Path(L.owner_note()).write_text(json.dumps({**note, "pid": os.getpid()}))
    assert owner.holder(L).startswith(f"pid {os.getpid()} on host ")


def test_a_results_dir_that_is_a_file_is_named_as_such(tmp_path: Path):
    afile = tmp_path / "results"
    afile.write_text("not a folder\n")
    with pytest.raises(owner.ResultsFileError) as e:
        owner.take(Layout(str(afile)))
    assert "names a file, not a folder" in str(e.value) and str(afile) in str(e.value)
    assert afile.read_text() == "not a folder\n"   # nothing written over it


def test_phonetrain_run_refuses_while_a_workflow_owns_the_folder(tmp_path: Path):
    """A one-off run writes a run folder, a runner and a plan into the results folder: under
    a running workflow it is refused naming the holder, and writes nothing."""
    L = Layout(str(tmp_path / "results"))
    lock = owner.take(L)
    try:
        res = CliRunner().invoke(main, ["run", "model=mlp_16_16", "backend=cpu",
                                        f"results_dir={L.root}", "measure.iterations=2"])
        assert res.exit_code == 1, res.output
        assert f"results folder {L.root} is in use by another workflow: pid {os.getpid()}" \
            in res.output, res.output
    finally:
        lock.release()
    assert sorted(p.name for p in Path(L.root).iterdir()) == ["owner.json", "owner.lock"]
