"""What a stage job spends outside its measurements: the train stage's numpy reference runs
its small GEMMs on one BLAS thread."""

from __future__ import annotations

from threadpoolctl import threadpool_info

from phonetrain import reference
from phonetrain.stages import train


def _blas_threads() -> list[int]:
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


def test_the_reference_verifies_a_run_on_one_blas_thread(tmp_path, monkeypatch):
    seen = []

    def verify_run_dir(plan, root, out, atol):
        seen.append(_blas_threads())
        return {"ok": True, "max_abs_err": 0.0}

    monkeypatch.setattr(reference, "verify_run_dir", verify_run_dir)
    monkeypatch.setattr(train.Plan, "load", staticmethod(lambda path: None))
    before = _blas_threads()
    doc = train.verify_run(tmp_path / "plan.json", tmp_path, tmp_path, 1e-3)
    assert doc["ok"] is True
    assert seen and seen[0] and all(n == 1 for n in seen[0])
    assert _blas_threads() == before   # the limit ends with the verification
