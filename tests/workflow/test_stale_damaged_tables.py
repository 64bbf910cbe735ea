"""`phonetrain stale` names a damaged summary table or history ledger (the files the
aggregate and report stages stop on), with what to do, beside Snakemake's plan."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers.workflow import TINY, env, make_workspace


def test_stale_reports_damaged_summary_and_ledger(tmp_path: Path):
    ws = make_workspace(tmp_path / "ws")
    summary = ws / "results" / "summary"
    summary.mkdir(parents=True)
    (summary / "runs.parquet").write_bytes(b"PAR1 truncated")  # not a Parquet file
    ledger = ws / "results" / "history" / "measurements.parquet"
    ledger.parent.mkdir(parents=True)
    ledger.write_bytes(b"")
    st = subprocess.run([sys.executable, "-m", "phonetrain.cli", "stale", *TINY], cwd=ws,
                        env=env(ws), capture_output=True, text=True, timeout=600)
    assert st.returncode == 0, st.stderr
    lines = st.stdout.splitlines()
    runs = [ln for ln in lines if ln.startswith("damaged results/summary/runs.parquet")]
    assert runs and "not a readable Parquet file" in runs[0] and "delete it" in runs[0], lines
    hist = [ln for ln in lines if ln.startswith("damaged results/history/measurements.parquet")]
    assert hist and "move results/history/measurements.parquet aside" in hist[0], lines
    assert "2 damaged tables" in st.stderr, st.stderr
    assert not [ln for ln in lines if ln.startswith("damaged results/summary/iterations")]
