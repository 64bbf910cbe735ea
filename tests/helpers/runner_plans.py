"""Hand-built plans for the runner tests: one SGD iteration of a 2-layer MLP on scikit-learn's
digits (8x8 = 64 features, 10 classes) for every backend/placement/transfer combination, and
a hand-written numpy version of the same training to check the runner against."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from helpers import REPO
from phonetrain.kernels import assemble_source
from phonetrain.plan import Batch, Plan, Program, Step, Tensor, uniform_fill

B, IN, HID, OUT = 16, 64, 32, 10
LR, MOMENTUM, WD = 0.1, 0.9, 1e-4
N_BATCHES = 2
W2_INIT = {"kind": "uniform", "seed": 11, "low": -0.2, "high": 0.2}
KERNEL_DIR = REPO / "src" / "kernels" / "baseline"

# id, name, shape, role, dtype
TENSORS = [
    ("x", [B, IN], "input", "f32"), ("y", [B], "label", "i32"),
    ("W1", [HID, IN], "param", "f32"), ("b1", [HID], "param", "f32"),
    ("W2", [OUT, HID], "param", "f32"), ("b2", [OUT], "param", "f32"),
    ("h", [B, HID], "activation", "f32"), ("logits", [B, OUT], "activation", "f32"),
    ("dlogits", [B, OUT], "grad", "f32"), ("row_loss", [B], "scratch", "f32"),
    ("loss", [1], "loss", "f32"), ("dh", [B, HID], "grad", "f32"),
    ("dW1", [HID, IN], "grad", "f32"), ("db1", [HID], "grad", "f32"),
    ("dW2", [OUT, HID], "grad", "f32"), ("db2", [OUT], "grad", "f32"),
    ("V_W1", [HID, IN], "state", "f32"), ("V_b1", [HID], "state", "f32"),
    ("V_W2", [OUT, HID], "state", "f32"), ("V_b2", [OUT], "state", "f32"),
]
T = {name: i for i, (name, *_rest) in enumerate(TENSORS)}
PARAMS = ["W1", "b1", "W2", "b2"]


def _k(name, args, glob, reads, writes, phase, layer=""):
    """A kernel step plus the tensors it reads and writes (for staged placements)."""
    enc = [{"t": T[a]} if isinstance(a, str) else ({"f": a} if isinstance(a, float) else {"i": a})
           for a in args]
    return Step(op="kernel", name=name, args=enc, global_size=glob, phase=phase, layer=layer), reads, writes


def kernel_steps():
    """The iteration's kernels in order, each with its read and write sets."""
    ks = [
        _k("gemm_nt", [B, HID, IN, 1.0, "x", "W1", 0.0, "h"], [HID, B], ["x", "W1"], ["h"], "forward", "fc1"),
        _k("bias_add", [B, HID, 1, "h", "b1"], [B * HID], ["h", "b1"], ["h"], "forward", "fc1"),
        _k("relu_fwd", [B * HID, "h", "h"], [B * HID], ["h"], ["h"], "forward", "relu1"),
        _k("gemm_nt", [B, OUT, HID, 1.0, "h", "W2", 0.0, "logits"], [OUT, B], ["h", "W2"], ["logits"], "forward", "fc2"),
        _k("bias_add", [B, OUT, 1, "logits", "b2"], [B * OUT], ["logits", "b2"], ["logits"], "forward", "fc2"),
        _k("softmax_xent", [B, OUT, "logits", "y", "dlogits", "row_loss"], [B], ["logits", "y"],
           ["dlogits", "row_loss"], "loss"),
        _k("mean", [B, "row_loss", "loss"], [1], ["row_loss"], ["loss"], "loss"),
        _k("gemm_tn", [OUT, HID, B, 1.0, "dlogits", "h", 0.0, "dW2"], [HID, OUT], ["dlogits", "h"], ["dW2"], "backward", "fc2"),
        _k("bias_grad", [B, OUT, 1, "dlogits", "db2"], [OUT], ["dlogits"], ["db2"], "backward", "fc2"),
        _k("gemm_nn", [B, HID, OUT, 1.0, "dlogits", "W2", 0.0, "dh"], [HID, B], ["dlogits", "W2"], ["dh"], "backward", "fc2"),
        _k("relu_bwd", [B * HID, "h", "dh", "dh"], [B * HID], ["h", "dh"], ["dh"], "backward", "relu1"),
        _k("gemm_tn", [HID, IN, B, 1.0, "dh", "x", 0.0, "dW1"], [IN, HID], ["dh", "x"], ["dW1"], "backward", "fc1"),
        _k("bias_grad", [B, HID, 1, "dh", "db1"], [HID], ["dh"], ["db1"], "backward", "fc1"),
    ]
    for p in PARAMS:
        n = int(np.prod(TENSORS[T[p]][1]))
        ks.append(_k("sgd_update", [n, LR, MOMENTUM, WD, p, "d" + p, "V_" + p], [n],
                     [p, "d" + p, "V_" + p], [p, "V_" + p], "update", p))
    return ks


def _transfer(op, name, access=None):
    return Step(op=op, tensor=T[name], access=access, phase="transfer")


def _up(name, method):
    return [_transfer("h2d", name)] if method == "copy" else [
        _transfer("map", name, "write"), _transfer("unmap", name)]


def _down(name, method):
    return [_transfer("d2h", name)] if method == "copy" else [
        _transfer("map", name, "read"), _transfer("unmap", name)]


def steps_for(backend: str, placement: str, method: str) -> list[Step]:
    """Steps of one iteration: cpu; opencl resident (batch up, loss down) or staged (every
    kernel's inputs up before it, outputs down after it), with copy or map transfers."""
    steps = [Step(op="load", tensor=T["x"], phase="load"), Step(op="load", tensor=T["y"], phase="load")]
    ks = kernel_steps()
    if backend == "cpu":
        return steps + [k for k, _, _ in ks]
    if placement == "resident":
        steps += _up("x", method) + _up("y", method)
        steps += [k for k, _, _ in ks]
        return steps + _down("loss", method)
    for k, reads, writes in ks:
        for r in reads:
            steps += _up(r, method)
        steps.append(k)
        for w in writes:
            steps += _down(w, method)
    return steps


def write_bundle(root: Path) -> dict[str, np.ndarray]:
    """Writes data and initial tensors under root; returns the numpy arrays used."""
    from sklearn.datasets import load_digits   # scikit-learn (with SciPy) only where used
    digits = load_digits()
    n = B * N_BATCHES
    x = (digits.data[:n] / 16.0).astype(np.float32)
    y = digits.target[:n].astype(np.int32)
    rng = np.random.default_rng(3)
    init = {"W1": (rng.standard_normal((HID, IN)) * 0.1).astype(np.float32),
            "b1": (rng.standard_normal(HID) * 0.01).astype(np.float32),
            "b2": np.zeros(OUT, np.float32)}
    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "tensors").mkdir(parents=True, exist_ok=True)
    x.astype("<f4").tofile(root / "data" / "x.f32")
    y.astype("<i4").tofile(root / "data" / "y.i32")
    for k, v in init.items():
        v.astype("<f4").tofile(root / "tensors" / f"{k}.f32")
    init["W2"] = uniform_fill(W2_INIT["seed"], OUT * HID, W2_INIT["low"], W2_INIT["high"]).reshape(OUT, HID)
    return {"x": x, "y": y, **init}


def mlp_plan(backend: str, placement: str = "resident", method: str = "copy",
             warmup: int = 1, iterations: int = 2) -> Plan:
    """The 2-layer MLP plan for one backend/placement/transfer method."""
    home = "device" if backend == "opencl" and placement == "resident" else "host"
    tensors = []
    for i, (name, shape, role, dtype) in enumerate(TENSORS):
        init = {"kind": "zeros"}
        if name in ("W1", "b1", "b2"):
            init = {"kind": "file", "path": f"tensors/{name}.f32"}
        elif name == "W2":
            init = dict(W2_INIT)
        tensors.append(Tensor(id=i, name=name, shape=shape, role=role, dtype=dtype, home=home, init=init))
    programs = []
    if backend == "opencl":
        programs = [Program(name=p.stem, source=f"kernels/{p.name}") for p in sorted(KERNEL_DIR.glob("*.cl"))]
    plan = Plan(name=f"mlp/{backend}-{placement}-{method}", backend=backend, tensors=tensors,
                steps=steps_for(backend, placement, method), programs=programs,
                batches=[Batch(tensor=T["x"], path="data/x.f32", count=N_BATCHES),
                         Batch(tensor=T["y"], path="data/y.i32", count=N_BATCHES)],
                warmup=warmup, iterations=iterations, loss_tensor=T["loss"],
                dumps=[T[p] for p in PARAMS] + [T["dW1"]])
    plan.validate()
    return plan


def stage(root: Path, plan: Plan) -> Path:
    """Writes the bundle (data, tensors, kernels, plan.json) under root; returns the plan path."""
    write_bundle(root)
    if plan.backend == "opencl":
        (root / "kernels").mkdir(exist_ok=True)
        for p in KERNEL_DIR.glob("*.cl"):   # common.cl in front, as stage_kernels writes them
            (root / "kernels" / p.name).write_text(assemble_source(p))
    plan.save(root / "plan.json")
    return root / "plan.json"


def numpy_training(arrays: dict[str, np.ndarray], steps: int):
    """Hand-written float64 numpy SGD (momentum, weight decay as PyTorch) of the same MLP;
    returns (losses per iteration, final params, last dW1)."""
    x_all = arrays["x"].astype(np.float64)
    y_all = arrays["y"]
    P = {k: arrays[k].astype(np.float64).copy() for k in PARAMS}
    V = {k: np.zeros_like(v) for k, v in P.items()}
    losses = []
    for it in range(steps):
        b = it % N_BATCHES
        x, y = x_all[b * B:(b + 1) * B], y_all[b * B:(b + 1) * B]
        h = np.maximum(x @ P["W1"].T + P["b1"], 0)
        z = h @ P["W2"].T + P["b2"]
        e = np.exp(z - z.max(axis=1, keepdims=True))
        p = e / e.sum(axis=1, keepdims=True)
        losses.append(-np.log(p[np.arange(B), y]).mean())
        dz = p.copy()
        dz[np.arange(B), y] -= 1
        dz /= B
        G = {"W2": dz.T @ h, "b2": dz.sum(0)}
        dh = (dz @ P["W2"]) * (h > 0)
        G["W1"] = dh.T @ x
        G["b1"] = dh.sum(0)
        for k in PARAMS:
            g = G[k] + WD * P[k]
            V[k] = MOMENTUM * V[k] + g
            P[k] = P[k] - LR * V[k]
    return np.array(losses), P, G["W1"]


def bench_gemm_here(runner, pocl, tmp_path: Path, spec: dict) -> dict:
    """One ``runner bench-gemm`` process of ``spec`` on this host's PoCL (``runner``, ``pocl``:
    the session fixtures), its output under ``tmp_path``: the runner's document."""
    from phonetrain import runner as rt
    r = rt.Runner.local_binary(runner, tmp_path / "root", pocl, timeout_s=120)
    return r.bench_gemm(spec, tmp_path / "out")
