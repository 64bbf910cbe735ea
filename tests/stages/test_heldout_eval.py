"""Held-out accuracy per run (``measure.eval_every``): the split never reaches training batches;
the real runner's own checkpointed parameters give the held-out accuracy a hand-written numpy
forward gives; it rises while training; it lands in eval.json, the run-folder check, the
Parquet tables and the report's finding and figure.

One real run (module fixture): ``phonetrain run`` of the MLP 784-256-128-16 on digits, CPU
backend, 1 warm-up + 100 measured iterations, batch 16, evaluated every 25.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from helpers import STEADY
from helpers.workflow import seed_runner_cache
from phonetrain import data as datasets
from phonetrain import layout
from phonetrain.cli import main
from phonetrain.data.idx import write_idx
from phonetrain.report import build, figures, findings
from phonetrain.results import aggregate, runs, schema

MODEL = "mlp_784_256_128_16"
EXP = f"{MODEL}.cpu.none"
EVERY = 25
OUTPUT: dict[str, str] = {}   # what `phonetrain run` printed


def _rows(x: np.ndarray) -> set[bytes]:
    return {r.tobytes() for r in np.ascontiguousarray(x).reshape(len(x), -1)}


@pytest.mark.parametrize("dataset, shape, classes", [("digits", None, None),
                                                     ("synthetic", (16,), 16)])
def test_heldout_split_is_disjoint_from_training_batches(tmp_path, dataset, shape, classes):
    kw = {"input_shape": shape, "classes": classes, "seed": 3}
    xt, _ = datasets.load(dataset, **kw)
    xh, yh = datasets.load(dataset, split="heldout", **kw)
    assert len(xh) > 0 and len(yh) == len(xh)
    assert abs(len(xh) / (len(xt) + len(xh)) - datasets.HELDOUT_FRACTION) < 0.01
    assert not _rows(xt) & _rows(xh)
    # more batches than the training split holds: every epoch draws from it alone
    n = 2 * (len(xt) // 32 + 1)
    doc = datasets.write_batches(dataset, 32, n, tmp_path, seed=3, input_shape=shape,
                                 classes=classes)
    drawn = np.fromfile(tmp_path / doc["images"], "<f4").reshape(32 * n, -1)
    assert not _rows(drawn) & _rows(xh)
    assert _rows(drawn) == _rows(xt)
    # fixed: the same samples whatever measure.seed (digits)
    if dataset == "digits":
        again, _ = datasets.load(dataset, split="heldout", seed=99)
        assert np.array_equal(again, xh)


def test_mnist_heldout_is_the_t10k_files(tmp_path):
    rng = np.random.default_rng(0)
    train, test = rng.integers(0, 256, (6, 28, 28)), rng.integers(0, 256, (4, 28, 28))
    write_idx(tmp_path / "train-images-idx3-ubyte", train)
    write_idx(tmp_path / "train-labels-idx1-ubyte", np.arange(6) % 10)
    write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", test, compress=True)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", np.array([9, 8, 7, 6]), compress=True)
    x, y = datasets.load("mnist", folder=tmp_path, split="heldout")
    assert x.shape == (4, 1, 28, 28) and y.tolist() == [9, 8, 7, 6]
    xt, _ = datasets.load("mnist", folder=tmp_path)
    assert len(xt) == 6 and not _rows(xt) & _rows(x)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(datasets.DatasetError, match="t10k-labels"):
        datasets.load("mnist", folder=tmp_path, split="heldout")


@pytest.fixture(scope="module")
def run(tmp_path_factory, runner) -> Path:
    R = tmp_path_factory.mktemp("heldout") / "results"
    seed_runner_cache(R, runner)   # the runner's compile is not what these tests watch
    args = ["run", f"model={MODEL}", "device=host", f"results_dir={R}", "backend=cpu",
            "dataset=digits", "model.batch_size=16", "measure.threads=1", "measure.warmup=1",
            "measure.iterations=100", "measure.max_iterations=100", "measure.progress=false",
            f"measure.eval_every={EVERY}", *STEADY]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, (res.output, res.exception)
    OUTPUT["run"] = res.output
    return R / "runs" / "host" / EXP


def _numpy_forward(ckpt: Path, x: np.ndarray) -> np.ndarray:
    """The MLP by hand: three Linear layers (y = x W^T + b), ReLU between, float64."""
    h = x.reshape(len(x), -1).astype(np.float64)
    for k, (o, i) in enumerate([(256, 784), (128, 256), (16, 128)], start=1):
        W = np.fromfile(ckpt / f"fc{k}.weight.f32", "<f4").reshape(o, i)
        b = np.fromfile(ckpt / f"fc{k}.bias.f32", "<f4")
        h = h @ W.T + b
        if k < 3:
            h = np.maximum(h, 0)
    return h


def test_eval_points_come_from_the_runners_parameters(run):
    doc = json.loads((run / layout.EVAL).read_text())
    pts = doc["points"]
    assert [p["measured_iteration"] for p in pts] == [25, 50, 75, 100]
    run_json = json.loads((run / layout.RUN).read_text())
    walls = np.cumsum([i["wall_ms"] for i in run_json["iters"]])
    x, y = datasets.load("digits", split="heldout")
    for p in pts:
        assert 0.0 <= p["heldout_accuracy"] <= 1.0 and p["n_heldout"] == len(y)
        assert p["cumulative_wall_ms"] == pytest.approx(walls[p["iteration"]])
        z = _numpy_forward(run / layout.CHECKPOINTS / str(p["iteration"]), x)
        lse = z.max(1) + np.log(np.exp(z - z.max(1, keepdims=True)).sum(1))
        assert p["heldout_loss"] == pytest.approx((lse - z[np.arange(len(y)), y]).mean(),
                                                  rel=1e-4)
        # float32 vs float64 logits may flip only samples whose two largest logits are
        # within float32 rounding of each other
        top2 = np.sort(z, axis=1)[:, -2:]
        near_ties = int((top2[:, 1] - top2[:, 0] <= 1e-4 * np.abs(z).max()).sum())
        flips = abs(p["heldout_accuracy"] - (z.argmax(1) == y).mean()) * len(y)
        assert flips <= near_ties + 1e-9, (flips, near_ties)


def test_accuracy_rises_while_training(run):
    pts = json.loads((run / layout.EVAL).read_text())["points"]
    assert pts[-1]["heldout_accuracy"] > pts[0]["heldout_accuracy"]
    assert pts[-1]["heldout_accuracy"] > 0.5   # ten classes: well above chance
    assert pts[-1]["heldout_loss"] < pts[0]["heldout_loss"]
    acc = f"{pts[-1]['heldout_accuracy']:.1%}"
    assert f"held-out: accuracy {acc}" in OUTPUT["run"], OUTPUT["run"]


def test_tables_on_real_parquet(run, tmp_path):
    out = {t: tmp_path / f"{t}.parquet" for t in schema.TABLES}
    aggregate.aggregate([run], out)
    it = schema.read_table(out["iterations"], "iterations")
    rr = schema.read_table(out["runs"], "runs")
    pts = json.loads((run / layout.EVAL).read_text())["points"]
    at = it[it["heldout_accuracy"].notna()]
    assert at["iteration"].tolist() == [p["iteration"] for p in pts]
    assert at["heldout_loss"].notna().all() and (at["repeat"] == 0).all()
    assert it["heldout_accuracy"].isna().sum() == len(it) - len(pts)
    r = rr.iloc[0]
    assert r["status"] == "ok"
    assert r["heldout_accuracy_last"] == pytest.approx(pts[-1]["heldout_accuracy"])
    assert r["heldout_loss_last"] == pytest.approx(pts[-1]["heldout_loss"])
    assert r["n_heldout"] == pts[-1]["n_heldout"]
    f = findings.accuracy_first(rr, it)
    acc = f"{100 * pts[-1]['heldout_accuracy']:.1f}%"
    assert f.measured and f.rows == [f"runs.parquet: host/{EXP}"]
    assert acc in f.statement
    assert figures.accuracy_vs_time(rr, it, tmp_path / "acc.png").stat().st_size > 0
    outs = {"html": tmp_path / "r.html", "md": tmp_path / "r.md",
            **{n: tmp_path / f"{n}.png" for n in build.FIGURES}}
    build.build_report(tmp_path, outs)
    md = (tmp_path / "r.md").read_text()
    assert "Time to accuracy" in md and f"held-out accuracy {acc}" in md
    none = it.assign(heldout_accuracy=np.nan, heldout_loss=np.nan)
    f = findings.accuracy_first(rr, none)
    assert not f.measured and "measure.eval_every" in f.statement


def test_folder_check_knows_eval_json(run, tmp_path):
    import shutil
    copy = tmp_path / EXP
    shutil.copytree(run, copy)
    assert runs.folder_problems(copy) == []
    (copy / layout.EVAL).unlink()
    assert any("eval.json" in p for p in runs.folder_problems(copy))
    (copy / layout.EVAL).write_text('{"points": [{"iteration": 1}]}')
    assert any("eval.json" in p for p in runs.folder_problems(copy))
    assert runs.read_run(copy)["runs"].iloc[0]["status"] == "failed"


def test_two_runs_ranked_by_time_to_accuracy():
    """The finding's wording follows the numbers: the faster of two equal trajectories first."""
    base = {"device": "d", "model": "m", "transfer": None, "kernel": None, "repeat": 0,
            "loss": 1.0, "heldout_loss": np.nan}
    rows = []
    for run_id, placement, kernel, wall in (("d/a", None, None, 2.0), ("d/b", "resident",
                                                                      "tiled", 1.0)):
        for i, acc in enumerate([np.nan, 0.5, np.nan, 0.8]):
            rows.append({**base, "run_id": run_id, "placement": placement, "kernel": kernel,
                         "transfer": "copy" if placement else None, "iteration": i,
                         "wall_ms": wall, "heldout_accuracy": acc})
    it = pd.DataFrame(rows)
    rr = pd.DataFrame([{"run_id": r, "device": "d", "model": "m", "placement": p,
                        "transfer": t, "kernel": k, "status": "ok"}
                       for r, p, t, k in (("d/a", None, None, None),
                                          ("d/b", "resident", "copy", "tiled"))])
    f = findings.accuracy_first(rr, it)
    assert f.statement.startswith("d, m: resident/copy tiled reached the highest held-out "
                                  "accuracy, 80.0%, first, after 0.004 s; cpu reached it "
                                  "later (0.008 s); at equal wall time (0.004 s) resident/copy "
                                  "tiled 80.0%, cpu 50.0%."), f.statement


def test_a_tie_in_time_is_worded_as_one():
    rows = [{"run_id": r, "device": "d", "model": "m", "placement": p, "transfer": t,
             "kernel": k, "repeat": 0, "iteration": i, "wall_ms": 1.0, "loss": 1.0,
             "heldout_loss": np.nan, "heldout_accuracy": [0.5, 0.9][i]}
            for r, p, t, k in (("d/a", None, None, None), ("d/b", "staged", "copy", "baseline"))
            for i in (0, 1)]
    rr = pd.DataFrame([{k: v for k, v in r.items() if k in ("run_id", "device", "model",
                        "placement", "transfer", "kernel")} | {"status": "ok"}
                       for r in rows[::2]])
    s = findings.accuracy_first(rr, pd.DataFrame(rows)).statement
    assert s.startswith("d, m: cpu and staged/copy baseline reached the highest held-out "
                        "accuracy, 90.0%, at the same time, after 0.002 s; at equal wall time "
                        "(0.002 s) all had 90.0%."), s
