"""benchmarks/peers.py with the core install only: phonetrain's rows run through the real
runner on PoCL and are verified; peers that are not installed are skipped with a note row;
nothing beyond numpy and PyYAML is imported on the way (Hydra, Snakemake, pandas blocked)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "peers.py"

BLOCKER = '''
import importlib.abc, sys
BLOCKED = {"pandas", "pyarrow", "hydra", "omegaconf", "snakemake", "sklearn", "scipy",
           "matplotlib", "adbutils", "filelock", "click", "jinja2"}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked: peers.py must need only numpy and PyYAML")
sys.meta_path.insert(0, Block())
'''


def _peers_module():
    spec = importlib.util.spec_from_file_location("peers_bench", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_validity_rule():
    peers = _peers_module()
    falling = [3.0 - 0.01 * i for i in range(30)]
    assert peers.loss_falls(falling) is True
    assert peers.loss_falls(falling[::-1]) is False
    assert peers.loss_falls([2.0] * 30) is False            # flat: not below
    assert peers.loss_falls(falling[:-1] + [float("nan")]) is False
    assert peers.loss_falls(falling[:19]) is None           # too short to judge
    assert peers.same_start([2.0, 1.9], [2.0, 1.9]) == 0.0
    assert peers.same_start([2.1, 1.9], [2.0, 1.9]) == pytest.approx(0.05)


def test_quick_core_install(runner, pocl, tmp_path):
    (tmp_path / "block").mkdir()
    (tmp_path / "block" / "sitecustomize.py").write_text(BLOCKER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "block"),
                                                        str(REPO / "src")])}
    out_json = tmp_path / "peers.json"
    p = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--peers", "phonetrain,torch,tinygrad,mnn,ort,executorch",
         "--models", "mlp_784_256_128_16", "--platforms", "Portable",
         "--placements", "resident-copy", "--kernel", "regblock", "--threads", "2",
         "--tinygrad-devices", "CL", "--runner", str(runner), "--json", str(out_json)],
        capture_output=True, text=True, env=env, timeout=240, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    table = [ln for ln in p.stdout.splitlines() if ln.startswith("|")]
    assert table[0].startswith("| framework | backend | model | median ms")
    body = "\n".join(table)
    # the CPU row, and the OpenCL row with and without the runner's profiling events
    assert body.count("| phonetrain ") == 3, body
    assert "verified per step" in body and "loss falls" in body and "same start" in body
    doc = json.loads(out_json.read_text())
    rows = {(r["framework"], r["backend"]): r for r in doc["rows"]}
    cpu = rows[("phonetrain", "CPU backend (OpenMP), 2 threads")]
    cl = rows[("phonetrain", "OpenCL Portable Computing Language, resident-copy")]
    cl_unprofiled = rows[("phonetrain", "OpenCL Portable Computing Language, resident-copy, "
                          "no profiling")]
    for r in (cpu, cl, cl_unprofiled):
        assert r["status"] == "ok" and r["verified"] and r["loss_falls"], r
        assert r["iterations"] == 20 and r["p10_ms"] <= r["median_ms"] <= r["p90_ms"]
        assert r["start_rel_err"] <= 1e-3
    assert cl["kernel"] == cl_unprofiled["kernel"] == "regblock"
    # --cpu-kernel best: both CPU lowerings ran verified, the row names the faster
    tried = [t for t in doc["kernel_selection"] if t["platform"] == "cpu"]
    assert sorted(t["candidate"] for t in tried) == ["baseline", "fused"], tried
    assert all(t["status"] == "ok" and t["verified"] for t in tried), tried
    faster = min(tried, key=lambda t: t["median_ms"])["candidate"]
    assert cpu["note"] == f"kernel {faster}, fastest verified of 2/2 versions (20 iterations)"
    for module, fw in (("torch", "PyTorch"), ("tinygrad", "tinygrad"), ("MNN", "MNN"),
                       ("onnxruntime", "ONNX Runtime"), ("executorch", "ExecuTorch")):
        mine = [r for r in doc["rows"] if r["framework"] == fw]
        assert mine, fw
        if importlib.util.find_spec(module) is None:   # the core install: a note, no error
            assert all(r["status"] == "skipped" and "not installed" in r["note"]
                       for r in mine), mine
            assert f"| {fw} " in body and "not installed" in body
        else:
            assert all(r["status"] in ("ok", "skipped") for r in mine), mine
    assert doc["host"]["logical_cores"] == os.cpu_count() and doc["versions"]["phonetrain"]


def test_mobile_layers_reach_the_peers_as_nested_json():
    """A Residual's body keeps each inner layer's type; the chain-only builders (tinygrad,
    MNN) skip such a model with the layers they lack, and build a chain model as before."""
    from phonetrain.models import get_model
    peers = _peers_module()
    docs = [peers._layer_doc(layer) for layer in get_model("mobilenetv2_small").layers]
    block = next(d for d in docs if d["type"] == "Residual")
    assert [d["type"] for d in block["body"]][:3] == ["Conv2d", "BatchNorm2d", "ReLU6"]
    assert {"DepthwiseConv2d", "GlobalAvgPool2d", "Residual"} <= peers._layer_types(docs)
    with pytest.raises(peers.Skip, match="tinygrad: no builder here for BatchNorm2d, "
                                          "DepthwiseConv2d, GlobalAvgPool2d, ReLU6, Residual"):
        peers._chain_only("tinygrad", {"layers": docs})
    lenet = [peers._layer_doc(layer) for layer in get_model("lenet5").layers]
    assert peers._chain_only("MNN", {"layers": lenet}) is None


def test_splitk_groups_reaches_phonetrain_plans(runner, pocl, tmp_path):
    """--splitk-groups 1024: LeNet-5's plan updates conv1 in split-K form (S = 7 at batch 32)
    and its row is still verified per step; the JSON records the setting. The CPU row (not
    checked here) runs one lowering, not the selection of the fastest of two."""
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp"),
           "PYTHONPATH": os.pathsep.join([str(REPO / "src")])}
    out_json = tmp_path / "peers.json"
    p = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--peers", "phonetrain", "--models", "lenet5",
         "--platforms", "Portable", "--placements", "resident-copy", "--kernel", "fused",
         "--profiling", "on", "--threads", "2", "--splitk-groups", "1024",
         "--cpu-kernel", "baseline", "--runner", str(runner), "--json", str(out_json)],
        capture_output=True, text=True, env=env, timeout=240, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    doc = json.loads(out_json.read_text())
    assert doc["splitk_groups"] == 1024
    cl = [r for r in doc["rows"] if r["framework"] == "phonetrain" and "OpenCL" in r["backend"]]
    assert [(r["status"], r["verified"], r["kernel"]) for r in cl] == [("ok", True, "fused")]
    from phonetrain.kernels import bind_args
    from phonetrain.plan import Plan
    plan_path, = (tmp_path / "tmp").glob("phonetrain-peers-*/plans/*opencl.fused*/plan.json")
    partial = [bind_args(s.name, s.args)["S"] for s in Plan.load(plan_path).steps
               if s.name == "conv_wgrad_partial"]
    assert partial == [7]


def test_untuned_tunable_versions_are_skipped_in_the_selection(tmp_path):
    """--kernel best: a tunable version without tuning files would run its untuned
    defaults (tens of times slower on a GPU): the selection skips it with a note, runs it
    with --untuned, and runs it tuned where --tuning-dir holds its files; a version with
    nothing to tune always runs."""
    from types import SimpleNamespace
    peers = _peers_module()

    def why(version, **kw):
        a = SimpleNamespace(**({"untuned": False, "tuning_dir": None} | kw))
        return peers.Phonetrain.untuned(SimpleNamespace(a=a), version)

    assert "skipped: tunable and untuned" in why("regblock")
    assert why("baseline") is None and why("fused") is None
    assert why("regblock", untuned=True) is None
    assert "skipped" in why("regblock", tuning_dir=str(tmp_path))   # no files for it there
    (tmp_path / "regblock" / "tuning").mkdir(parents=True)
    (tmp_path / "regblock" / "tuning" / "model_nt.json").write_text("{}")
    assert why("regblock", tuning_dir=str(tmp_path)) is None


def test_killed_run_keeps_its_finished_rows(runner, tmp_path):
    """A run killed half-way (SIGKILL after its first row) leaves a complete JSON with every
    row it finished (``finished`` false), each printed as it completed; the phonetrain
    version names this checkout's revision even when the working folder lies in another git
    repository."""
    import signal
    import time
    work = tmp_path / "other-repo"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    subprocess.run(["git", "-C", str(work), "-c", "user.email=a@b", "-c", "user.name=a",
                    "commit", "-q", "--allow-empty", "-m", "other"], check=True)
    other = subprocess.run(["git", "-C", str(work), "rev-parse", "--short=12", "HEAD"],
                           capture_output=True, text=True, check=True).stdout.strip()
    out_json = work / "peers.json"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--quick", "--peers", "phonetrain", "--platforms", "none",
         "--models", "mlp_784_256_128_16,lenet5,vgg_small", "--threads", "1",
         "--runner", str(runner), "--json", str(out_json)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=work)
    try:
        deadline = time.monotonic() + 240
        rows = []
        while time.monotonic() < deadline and proc.poll() is None:
            if out_json.exists():
                rows = json.loads(out_json.read_text())["rows"]
                if rows:
                    break
            time.sleep(0.05)
        assert rows, "no row was written within 240 s"
        proc.send_signal(signal.SIGKILL)
        stdout, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL    # killed before vgg_small's rows finished
    doc = json.loads(out_json.read_text())
    assert doc["finished"] is False and len(doc["rows"]) >= 1
    first = doc["rows"][0]
    assert (first["framework"], first["model"], first["status"]) == \
        ("phonetrain", "mlp_784_256_128_16", "ok")
    assert first["verified"] and first["start_rel_err"] <= 1e-3
    assert len(doc["kernel_selection"]) >= 2     # the CPU lowerings tried for the MLP
    printed = [ln for ln in stdout.splitlines() if ln.startswith("| phonetrain ")]
    assert len(printed) >= len(doc["rows"]) and "MLP 784-256-128-16" in printed[0]
    from phonetrain.results.provenance import git_rev
    ours = git_rev.__wrapped__()    # not the session's cached revision: read it now
    assert ours in doc["versions"]["phonetrain"] and other not in doc["versions"]["phonetrain"]


def test_a_copy_without_git_names_the_commit_it_was_copied_from(monkeypatch):
    """--source-commit: a tree copied without its .git records its sources hash and the
    commit it was copied from; a real checkout keeps its own revision, whatever was given."""
    from phonetrain.results import provenance
    peers = _peers_module()
    monkeypatch.setattr(provenance, "git_rev", lambda: f"{provenance.NOT_GIT}, sources 5eed")
    assert peers.phonetrain_commit("0123abcd") == \
        "not a git checkout, sources 5eed, copied from 0123abcd"
    assert peers.phonetrain_commit(None) == "not a git checkout, sources 5eed"
    monkeypatch.setattr(provenance, "git_rev", lambda: "0123456789ab")
    assert peers.phonetrain_commit("ffff") == "0123456789ab"
