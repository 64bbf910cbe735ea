"""Tuning kept per shape class, tuned by one job per device x version: a finished study that
gains a model reruns that version's tune job, which tunes only the classes the new model
brings, and deploys and trains only the new model's runs; every existing run and every
existing class file stays as it was. A class file that goes missing reruns the tune job and
exactly the deploys that read it. (Real Snakemake: a tiny study with the tunable ``regblock``
version is finished, then a model is added by override.)"""

from __future__ import annotations

from pathlib import Path

import helpers.workflow as W

COMMON = W.TINY + ["sweep.kernels=[baseline,regblock]", "sweep.backends=[opencl]",
                   "measure.gemm_sizes=[32]"]
BASE = COMMON + ["sweep.models=[mlp_16_16]"]
# mlp_16_16_16_16 shares mlp_16_16's gemm_nt_32x16x16 and gemm_tn_16x16x32 and adds
# gemm_nn_32x16x16 (its hidden layer's input gradient)
GROWN = COMMON + ["sweep.models=[mlp_16_16,mlp_16_16_16_16]"]
TUNING = Path("results/build/host/kernels/regblock/tuning")
TUNE_RULE = "tune_regblock"   # rules/gemm.smk: one tune rule per tunable version


def _finished(root: Path, runner: Path) -> Path:
    ws = W.make_workspace(root / "ws", runner)
    targets = [f"results/runs/host/mlp_16_16.opencl.{k}/run.json" for k in ("baseline",
                                                                             "regblock")]
    p = W.snakemake(ws, *targets, overrides=BASE)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return ws


def test_adding_a_model_tunes_only_its_new_classes_and_reruns_no_existing_run(tmp_path,
                                                                            runner):
    ws = _finished(tmp_path, runner)
    before = {f.name: f.read_bytes() for f in (ws / TUNING).glob("*.json")}
    assert set(before) == {"gemm_nt_32x16x16.json", "gemm_tn_16x16x32.json", "squares.json"}
    jobs = W.planned_jobs(ws, GROWN)
    assert sum(r.startswith("tune") for r, _ in jobs) == 1, jobs   # one job per version
    assert (TUNE_RULE, {"device": "host"}) in jobs, jobs
    runs = {w["exp"] for r, w in jobs if r in ("deploy", "train")}
    assert runs == {"mlp_16_16_16_16.opencl.baseline", "mlp_16_16_16_16.opencl.regblock"}, jobs
    # the new model's runs are made, and with them its new class; nothing else is rewritten
    targets = [f"results/runs/host/mlp_16_16_16_16.opencl.{k}/run.json"
               for k in ("baseline", "regblock")]
    p = W.snakemake(ws, *targets, overrides=GROWN)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "tune regblock on host: kept 3 of 4 tuning files" in p.stderr, p.stderr[-3000:]
    after = {f.name: f.read_bytes() for f in (ws / TUNING).glob("*.json")}
    assert set(after) == set(before) | {"gemm_nn_32x16x16.json"}
    assert all(after[n] == b for n, b in before.items())
    again = {(r, w.get("exp")) for r, w in W.planned_jobs(ws, GROWN)
             if r.startswith("tune") or r in ("deploy", "train")}
    assert again == set(), again

    # a class file gone: its tune job and the deploys that read it rerun (ancient() inputs
    # skip only files that exist), the other version's runs do not
    (ws / TUNING / "gemm_nt_32x16x16.json").unlink()
    gone = {(r, w.get("exp")) for r, w in W.planned_jobs(ws, GROWN)
            if r.startswith("tune") or r == "deploy"}
    assert gone == {(TUNE_RULE, None), ("deploy", "mlp_16_16.opencl.regblock"),
                    ("deploy", "mlp_16_16_16_16.opencl.regblock")}, gone
