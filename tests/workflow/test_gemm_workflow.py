"""Incremental reruns of the GEMM study: an edit to src/kernels/tiled/ reruns only the jobs of
``tiled`` and of the versions inheriting from it (build, tune, GEMM sweep, deploy, train),
then aggregate and report; nothing of ``baseline`` or ``regblock``.

The workspace's outputs are created empty and marked up to date with ``snakemake --touch``
(no job runs), so the test checks the DAG's dependencies in seconds; the real jobs run in
tests/workflow/test_workflow.py's completed workspace and in tests/kernels/test_tuning.py.
"""

from __future__ import annotations

from pathlib import Path

import helpers.workflow as W

OVERRIDES = W.TINY + ["sweep.kernels=[baseline,tiled,tiled_child,regblock]"]
PRODUCES_DIRS = {"lower", "data"}   # rules whose output is a folder


def _up_to_date_workspace(root: Path) -> Path:
    ws = W.make_workspace(root / "ws")
    child = ws / "src" / "kernels" / "tiled_child"
    child.mkdir()
    (child / "version.yaml").write_text("inherits: tiled\ndefines: {TSK: 16}\n")
    (ws / "conf" / "kernel" / "tiled_child.yaml").write_text("name: tiled_child\n")
    p = W.snakemake(ws, "--summary", "all", overrides=OVERRIDES)
    assert p.returncode == 0, p.stderr[-3000:]
    for line in p.stdout.splitlines()[1:]:
        f, _, rule = line.split("\t")[:3]
        if rule in PRODUCES_DIRS:
            (ws / f).mkdir(parents=True, exist_ok=True)
        else:
            (ws / f).parent.mkdir(parents=True, exist_ok=True)
            (ws / f).touch()
    # twice: a touched tune job does not make its deploys due (they take its files as
    # ancient()), so a deploy whose placeholder is older than another input's is touched in
    # the second pass
    for _ in range(2):
        p = W.snakemake(ws, "--touch", "all", overrides=OVERRIDES)
        assert p.returncode == 0, p.stderr[-3000:]
    assert not W.planned(ws, OVERRIDES), "the touched workspace should be up to date"
    return ws


def test_edit_to_tiled_reruns_only_tiled_and_its_children(tmp_path):
    ws = _up_to_date_workspace(tmp_path)
    gemm_cl = ws / "src" / "kernels" / "tiled" / "gemm.cl"
    gemm_cl.write_text(gemm_cl.read_text() + "\n/* an edit */\n")
    jobs = W.planned_jobs(ws, OVERRIDES)
    versions = set()
    for rule, wc in jobs:
        v = wc.get("kernel") or wc.get("version") or (wc["exp"].split(".")[2] if "exp" in wc
                                                      else None)
        if v:
            versions.add(v)
    assert versions == {"tiled", "tiled_child"}, jobs
    rules = {r for r, _ in jobs}
    assert {"build_kernels", "tune_tiled", "tune_tiled_child", "gemm", "deploy", "train",
            "aggregate", "report"} <= rules
    assert not rules & {"build_runner", "lower", "data", "bandwidth", "peaks"}, rules


def test_absent_clblast_is_a_skipped_row_with_its_reason(tmp_path):
    """The gemm stage's output for a device without libclblast aggregates to one ``skipped``
    row carrying the runner's reason (the report shows why, nothing fails)."""
    import json

    from phonetrain.results import schema
    from phonetrain.results.readers import read_gemm

    doc = {"device": "phone", "version": "clblast", "status": "skipped", "rows": [],
           "reason": "libclblast not found (tried libclblast.so.1, libclblast.so)"}
    (tmp_path / "clblast.json").write_text(json.dumps(doc))
    df = read_gemm(tmp_path / "clblast.json")
    table = schema.conform(df, "gemm").to_pandas()
    assert table["status"].tolist() == ["skipped"]
    assert "libclblast not found" in table["status_reason"].iloc[0]
