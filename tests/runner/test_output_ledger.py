"""The runner's output ledger: run.json lists every other file the run wrote with its size and
SHA-256 (src/runner/ledger.c), so a folder cut short, grown or replaced later is detectable."""

from __future__ import annotations

import hashlib
import numpy as np
import pytest

from phonetrain import runner as rt
from phonetrain.plan import Plan, Tensor
from helpers.runner_plans import mlp_plan, stage


@pytest.mark.parametrize("backend", ["cpu", "opencl"])
def test_run_json_lists_each_output_with_its_size_and_sha256(runner, pocl, tmp_path, backend):
    path = stage(tmp_path / "b", mlp_plan(backend))
    out = tmp_path / "out"
    doc = rt.run_plan(runner, path, tmp_path / "b", out, device_selector=pocl)
    written = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()} - {"run.json"}
    assert set(doc["files"]) == written and "trace.csv" in written
    assert {f"dumps/{d.split('/')[-1]}" for d in doc["dumps"]} <= written
    for rel, entry in doc["files"].items():
        data = (out / rel).read_bytes()
        assert entry == {"size_bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}, rel


def test_sha256_at_the_padding_edges(runner, tmp_path):
    """Dumps of 4, 56, 64 and 400 bytes (one padding block, the length field spilling into a
    second block, an exact block, several blocks: FIPS 180-4 section 5.1.1) hash as hashlib
    hashes them."""
    for n_floats in (1, 14, 16, 100):
        root = tmp_path / f"n{n_floats}"
        root.mkdir()
        np.arange(n_floats, dtype="<f4").__truediv__(7).astype("<f4").tofile(root / "x.f32")
        plan = Plan(name="hash", backend="cpu", warmup=0, iterations=1, loss_tensor=-1,
                    tensors=[Tensor(id=0, name="X", shape=[n_floats], role="scratch",
                                    init={"kind": "file", "path": "x.f32"})],
                    steps=[], dumps=[0])
        plan.save(root / "plan.json")
        doc = rt.run_plan(runner, root / "plan.json", root, root / "out")
        data = (root / "out" / "dumps" / "X.f32").read_bytes()
        assert data == (root / "x.f32").read_bytes()
        assert doc["files"]["dumps/X.f32"]["sha256"] == hashlib.sha256(data).hexdigest()
        empty_trace = (root / "out" / "trace.csv").read_bytes()
        assert doc["files"]["trace.csv"]["sha256"] == hashlib.sha256(empty_trace).hexdigest()
