#!/usr/bin/env python3
"""PyTorch cross-check: the lowered plans train exactly like torch.nn + torch.optim.

For each model of ``phonetrain.models.MODELS`` this lowers a cpu-backend bundle, builds the
same network in PyTorch from the plan's initial parameter files (Linear ``W[out, in]``,
Conv2d ``W[OC, C, KH, KW]``, depthwise ``W[C, 1, 3, 3]`` as ``groups=C``, batch norm's
weight/bias and running statistics, activations NCHW: the layouts of
``src/kernels/README.md``),
feeds the bundle's batch files, and trains ``--iterations`` steps of ``--optimizer`` (``sgd``:
``torch.optim.SGD`` with the plan's lr/momentum/weight_decay; ``adam``/``adamw``:
``torch.optim.Adam``/``AdamW`` with lr, ``--betas``, ``--eps``, weight_decay). It compares per-iteration losses, final parameters and batch norm
running statistics with
``phonetrain.reference.run_plan`` and, when ``cc`` is installed, the runner's cpu backend.
Differences are ``phonetrain.reference.tensor_error`` (``|a - b| / max(1, |b|)``).
Prints a markdown table; exits 1 if any difference exceeds ``--tolerance``. ``--float64``
runs PyTorch and the reference in float64 (the runner stays float32, its column is then
n/a): the semantics alone, without float32 rounding, which a near-tie of a ReLU/ReLU6 (an
input within rounding of 0) can turn into a whole gradient contribution after a few steps.

PyTorch is optional (not a phonetrain dependency): without it this prints how to install it
and exits 0::

    pip install torch            # CPU build is enough
    python benchmarks/torch_crosscheck.py
    python benchmarks/torch_crosscheck.py --models lenet5 --no-runner
    python benchmarks/torch_crosscheck.py --optimizer adamw --lr 1e-3 --momentum 0 \
        --weight-decay 0.01
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers import torch_residual  # noqa: E402
from phonetrain import reference  # noqa: E402
from phonetrain import runner as rt  # noqa: E402
from phonetrain.devices import toolchains  # noqa: E402
from phonetrain.models import (MODELS, BatchNorm2d, Conv2d, DepthwiseConv2d,  # noqa: E402
                               Flatten, GlobalAvgPool2d, Linear, MaxPool2d, Model, ReLU, ReLU6,
                               Residual, get_model)
from phonetrain.plan import Plan  # noqa: E402

TOLERANCE = 1e-4


def _torch_layer(layer, plan: Plan, root: Path, named: dict):
    """The torch module of one layer, its parameters (and batch norm's running statistics)
    loaded from the plan's init files and recorded in ``named`` by plan tensor name."""
    import torch
    from torch import nn

    if isinstance(layer, Residual):
        return torch_residual(
            nn.Sequential(*[_torch_layer(inner, plan, root, named) for inner in layer.body]))
    if isinstance(layer, Linear):
        m = nn.Linear(layer.in_features, layer.out_features)
    elif isinstance(layer, Conv2d):
        m = nn.Conv2d(layer.in_channels, layer.out_channels, layer.kernel,
                      stride=layer.stride, padding=layer.pad, bias=layer.bias)
    elif isinstance(layer, DepthwiseConv2d):
        m = nn.Conv2d(layer.channels, layer.channels, 3, stride=layer.stride,
                      padding=layer.pad, groups=layer.channels, bias=False)
    elif isinstance(layer, BatchNorm2d):
        m = nn.BatchNorm2d(layer.channels, eps=layer.eps, momentum=layer.momentum)
    elif isinstance(layer, ReLU):
        m = nn.ReLU()
    elif isinstance(layer, ReLU6):
        m = nn.ReLU6()
    elif isinstance(layer, MaxPool2d):
        m = nn.MaxPool2d(layer.kernel, stride=layer.stride)
    elif isinstance(layer, GlobalAvgPool2d):
        m = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())
    elif isinstance(layer, Flatten):
        m = nn.Flatten()
    else:
        raise TypeError(f"layer {layer.name}: no PyTorch equivalent for "
                        f"{type(layer).__name__}")
    tensors = dict(m.named_parameters())
    if isinstance(layer, BatchNorm2d):
        tensors.update(running_mean=m.running_mean, running_var=m.running_var)
    for pname, p in tensors.items():
        t = plan.by_name(f"{layer.name}.{pname}")
        raw = np.fromfile(root / t.init["path"], "<f4").reshape(t.shape)
        with torch.no_grad():
            p.copy_(torch.from_numpy(raw))
        named[t.name] = p
    return m


def torch_network(model: Model, plan: Plan, root: Path):
    """``(torch.nn.Sequential of model, {plan tensor name: torch tensor})``: parameters and
    batch norm's running statistics read from the plan's init files. Residual blocks become a
    module adding its input to its body's output; batch norm runs in training mode."""
    from collections import OrderedDict

    from torch import nn

    named: dict = {}
    mods = [(layer.name, _torch_layer(layer, plan, root, named)) for layer in model.layers]
    return nn.Sequential(OrderedDict(mods)), named


def torch_optimizer(params, optimizer: str, lr: float, momentum: float, weight_decay: float,
                    betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
    """``torch.optim.SGD`` (lr, momentum, weight_decay) for ``sgd``, ``torch.optim.Adam`` or
    ``torch.optim.AdamW`` (lr, betas, eps, weight_decay) for ``adam``/``adamw``."""
    import torch

    if optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[optimizer]
    return cls(params, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)


def torch_train(model: Model, plan: Plan, root: Path, lr: float, momentum: float,
                weight_decay: float, n_iter: int, optimizer: str = "sgd",
                betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8
                ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Train ``n_iter`` float32 steps of ``optimizer`` (:func:`torch_optimizer`) on the plan's
    batches (cycled as the runner does); return (losses before each update, final params and
    batch norm running statistics by plan tensor name, flat)."""
    import torch

    net, named = torch_network(model, plan, root)
    dtype = torch.get_default_dtype()
    net = net.to(dtype)
    opt = torch_optimizer(net.parameters(), optimizer, lr, momentum, weight_decay, betas, eps)
    data = {}
    for b in plan.batches:
        t = plan.tensor(b.tensor)
        raw = np.fromfile(root / b.path, "<i4" if t.dtype == "i32" else "<f4")
        data[t.name] = raw[: b.count * t.numel].reshape(b.count, *t.shape)
    count = len(data["input"])
    losses = np.empty(n_iter)
    for it in range(n_iter):
        x = torch.from_numpy(data["input"][it % count].copy()).to(dtype)
        y = torch.from_numpy(data["labels"][it % count].astype(np.int64))
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        losses[it] = loss.item()
    params = {n: p.detach().numpy().ravel().copy() for n, p in named.items()}
    return losses, params


def max_err(losses_a, params_a, losses_b, params_b) -> tuple[float, float]:
    """(loss error, worst parameter error) of a against b, as ``reference.tensor_error``."""
    loss = reference.tensor_error(losses_a, losses_b)
    param = max(reference.tensor_error(params_a[k], v) if k in params_a else float("inf")
                for k, v in params_b.items())
    return loss, param


def check_model(name: str, root: Path, a, runner: Path | None) -> dict:
    from phonetrain.lowering import LowerSpec, write_bundle

    spec = LowerSpec(model=name, batch_size=a.batch, backend="cpu", warmup=0,
                     iterations=a.iterations, num_batches=a.iterations, lr=a.lr,
                     momentum=a.momentum, weight_decay=a.weight_decay, dumps="all",
                     optimizer=a.optimizer, betas=tuple(a.betas), eps=a.eps)
    plan_path = write_bundle(spec, root)
    plan = Plan.load(plan_path)
    ref = reference.run_plan(plan, root, dtype=np.float64 if a.float64 else np.float32)
    losses, params = torch_train(get_model(name), plan, root, a.lr, a.momentum,
                                 a.weight_decay, a.iterations, a.optimizer, tuple(a.betas),
                                 a.eps)
    # the dumps hold every tensor; compare parameters and running statistics
    ref.dumps = {k: v for k, v in ref.dumps.items() if k in params}
    row = {"model": name}
    row["loss_err"], row["param_err"] = max_err(losses, params, ref.losses, ref.dumps)
    errs = [row["loss_err"], row["param_err"]]
    row["runner_err"] = None
    if runner is not None and not a.float64:
        out = root / "out" / plan.name
        doc = rt.run_plan(runner, plan_path, root, out)
        run_losses = np.array([it["loss"] for it in doc["iters"]], np.float64)
        run_dumps = {k: v for k, v in reference.read_dumps(out / "dumps", plan).items()
                     if k in params}
        row["runner_err"] = max(max_err(losses, run_dumps, run_losses, params))
        errs.append(row["runner_err"])
    row["status"] = "ok" if max(errs) <= a.tolerance else "MISMATCH"
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=sorted(MODELS))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=1e-4)
    ap.add_argument("--optimizer", choices=("sgd", "adam", "adamw"), default="sgd",
                    help="adam/adamw take --betas and --eps and need --momentum 0")
    ap.add_argument("--betas", type=float, nargs=2, default=(0.9, 0.999))
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--tolerance", type=float, default=TOLERANCE)
    ap.add_argument("--no-runner", action="store_true", help="skip the runner's cpu backend")
    ap.add_argument("--float64", action="store_true",
                    help="PyTorch and the reference in float64 (no runner column)")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed, so there is nothing to cross-check (it is optional).\n"
              "Install a CPU build with `pip install torch` (e.g. "
              "`pip install torch --index-url https://download.pytorch.org/whl/cpu`) "
              "and run this script again.")
        return 0
    torch.manual_seed(0)
    if a.float64:
        torch.set_default_dtype(torch.float64)
    with tempfile.TemporaryDirectory() as tmp:
        runner = None
        if not a.no_runner and toolchains.which_cc():
            runner = toolchains.build_runner(Path(tmp) / "build")
        rows = [check_model(m, Path(tmp) / "bundle", a, runner) for m in a.models]
    opt = (f"momentum {a.momentum}" if a.optimizer == "sgd"
           else f"betas {tuple(a.betas)}, eps {a.eps:g}")
    print(f"torch {torch.__version__}; {'float64' if a.float64 else 'float32'}; batch {a.batch}, "
          f"{a.iterations} {a.optimizer} iterations, lr {a.lr}, {opt}, "
          f"weight_decay {a.weight_decay}; "
          f"diffs are |a-b|/max(1,|b|), tolerance {a.tolerance:g}\n")
    print("| model | max loss diff torch vs reference | max param diff torch vs reference "
          "| max diff torch vs runner (cpu) | status |")
    print("|---|---:|---:|---:|---|")
    for r in rows:
        run = "n/a" if r["runner_err"] is None else f"{r['runner_err']:.1e}"
        print(f"| {r['model']} | {r['loss_err']:.1e} | {r['param_err']:.1e} | {run} "
              f"| {r['status']} |")
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
