"""The fused lowering checked against the per-layer one: the same trajectory on every
placement, in float64 through the numpy reference."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from phonetrain import reference
from phonetrain.lowering import LowerSpec, write_bundle


def assert_fused_matches(base: LowerSpec, want, kept: list[str], placements, tmp_path: Path,
                         rtol: float, atol: float, **spec) -> None:
    """Lower ``base`` with ``kernel="fused"`` (and ``spec``'s fields) on each of
    ``placements`` (``(backend, placement, transfer)``), run it in float64 and assert its
    losses equal ``want``'s (rtol 1e-12) and its dumps ``kept`` within ``rtol``/``atol``."""
    for backend, placement, transfer in placements:
        s = replace(base, kernel="fused", backend=backend, placement=placement,
                    transfer=transfer, **spec)
        root = tmp_path / f"{backend}-{placement}-{transfer}"
        got = reference.run_plan(write_bundle(s, root, seed=0), root, dtype=np.float64)
        np.testing.assert_allclose(got.losses, want.losses, rtol=1e-12, atol=0)
        for k in kept:
            np.testing.assert_allclose(got.dumps[k], want.dumps[k], rtol=rtol, atol=atol,
                                       err_msg=f"{placement}: {k}")
