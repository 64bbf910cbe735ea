"""Planted faults: a private copy of ``src/kernels`` with one line of one file changed, and a
float32 'runner' with one ReLU decision planted."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from phonetrain.kernels import KERNELS_ROOT
from phonetrain.reference.interpreter import Interpreter


def planted_kernels(tmp_path: Path, file: str, old: str, new: str) -> Path:
    """A copy of ``src/kernels`` under ``tmp_path/kernels`` whose ``file`` (relative, e.g.
    ``fused/fused.cl``) has ``old`` replaced by ``new``; asserts ``old`` is there, so a
    moved line fails the test instead of planting nothing. Returns the copy's root."""
    root = tmp_path / "kernels"
    shutil.copytree(KERNELS_ROOT, root)
    src = root / file
    assert old in src.read_text(), f"{file}: {old!r} not found"
    src.write_text(src.read_text().replace(old, new))
    return root


def state32(plan, root: Path, iteration: int, before=None, decide=None,
            kernel: str = "relu_fwd", out_arg: int = 2) -> dict:
    """A 'runner' that sums like numpy: the float32 interpreter's checkpoint tensors (name ->
    array) after ``iteration``, from the state ``before`` (None: from the start).
    ``decide=(tensor, index, value)`` overwrites one element of the output (argument
    ``out_arg``) of the ``kernel`` step writing ``tensor``, right after it: a runner whose
    ReLU decided the other way there (a planted tie)."""
    it = Interpreter(plan, root, np.float32)
    if before is not None:
        for t in plan.checkpoints["tensors"]:
            it.set_tensor(t, before[plan.tensor(t).name])
    for i in range(0 if before is None else iteration, iteration + 1):
        for st in plan.steps:
            it.run_step(st, i)
            if decide and st.op == "kernel" and st.name == kernel and \
                    plan.tensor(st.args[out_arg]["t"]).name == decide[0]:
                it.dev[st.args[out_arg]["t"]][decide[1]] = decide[2]
    return {plan.tensor(t).name: it.home(t).copy() for t in plan.checkpoints["tensors"]}
