#!/usr/bin/env python3
"""One training step of phonetrain beside its peers: PyTorch, tinygrad, MNN, ONNX Runtime
training and ExecuTorch training.

Every row times the same step: the model of ``src/phonetrain/models/zoo.py`` at batch 32,
the same initial parameters (``phonetrain.lowering.init_params``, loaded into every peer),
the same batches (``phonetrain.data.write_batches``, cycled), softmax cross-entropy, plain SGD
(``--lr``, no momentum, no weight decay); per iteration the batch is copied in from host
memory and the loss is read back to the host. Rows:

* phonetrain: the plan lowered by ``phonetrain.lowering`` and run by the project's runner
  (``phonetrain.runner.Runner``) on its CPU backend (OpenMP, ``--threads``; the faster
  verified of the kernel-by-kernel and the fused lowering, ``--cpu-kernel best``, or the one
  given) and on each requested OpenCL platform x placement (resident/copy, staged/copy,
  staged/map, pipelined/copy), with the
  fastest per-step-verified kernel version (``--kernel best``; tuned where ``--tuning-dir``
  holds the workflow's ``<version>/tuning/<class>.json`` files, a tunable version without
  them skipped unless ``--untuned``) or the version given; each
  timed run is verified per step against the numpy reference
  (``phonetrain.reference.verify_run_dir``).
  Time: the runner's own per-iteration ``wall_ms`` (an OpenCL iteration ends with
  ``clFinish``; it includes the batch upload and the loss read-back). ``--profiling both``
  (the default) times each OpenCL row twice: with the runner's profiling event per command
  (the study's way) and without (``runner run --no-profiling``, a training loop that does not
  profile; not for the pipelined placement, whose wait lists need the events).
* PyTorch CPU eager (``--threads``), CUDA eager, CUDA graphs (one captured step replayed);
  tinygrad with TinyJit on each of ``--tinygrad-devices``; MNN's Python training API on its
  CPU backend (``--threads``). PyTorch builds every layer of the zoo (batch norm in training
  mode, depthwise, ReLU6, global average pooling, residual blocks included); the tinygrad and
  MNN builders here only the chain layers (:data:`CHAIN_LAYERS`), and skip other models with
  a note. ONNX Runtime's on-device training API (artifacts generated from the model PyTorch
  exports, SGD, ``--threads`` intra-op threads) and ExecuTorch's training extension (the
  joint forward-backward graph on its portable CPU kernels, its SGD) take the same model,
  weights and batches. Each peer row runs in its own process (``--python``), timed by
  :func:`time_steps` (``time.perf_counter`` around one whole step, loss read back inside).

Statistics over the ``--iterations`` timed iterations after ``--warmup``: median, p10 and p90
(numpy's linear percentiles). Validity: a row whose loss does not fall -- the mean of its
last 10 losses (warm-up included in the run) not below the mean of its first 10 -- is marked
invalid (:func:`loss_falls`). A peer that is not installed or has no such device gets a
``skipped`` row; a peer that fails gets an ``error`` row and the script goes on. Every row
also starts from the same point: its first 10 losses must agree with the numpy reference's
(:func:`same_start`). Prints a header (command, date, host, versions: phonetrain's is the
revision of the checkout the script belongs to), then one markdown row per row as it
completes; ``--json FILE`` keeps it all, rewritten atomically after each row (``"finished":
false`` until the end), so a run killed half-way keeps every row it finished
(:class:`RowLog`). Exit status 1 when a row errs, is invalid or fails verification, else 0.

Needs numpy and PyYAML (and ``cc`` with the OpenCL headers to build the runner); no Hydra,
Snakemake or pandas. The peers: ``pip install -e .[peers]``. Examples::

    python benchmarks/peers.py --threads 16 --tinygrad-cl-platform NVIDIA --json peers.json
    python benchmarks/peers.py --quick --peers phonetrain
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.util
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

REPO = Path(__file__).resolve().parents[1]

MODELS = ("mlp_784_256_128_16", "lenet5")
PEERS = ("phonetrain", "torch", "tinygrad", "mnn", "ort", "executorch")
PLACEMENTS = {"resident-copy": ("resident", "copy"), "staged-copy": ("staged", "copy"),
              "staged-map": ("staged", "map"), "pipelined-copy": ("pipelined", "copy")}
VERSIONS = ("baseline", "tiled", "regblock", "image", "clblast", "fused")
# the CPU backend's lowerings: the kernel-by-kernel step, and the fused step (whose linear
# layers run the GEMM engine with their epilogues; its convolutions loop per output element)
CPU_VERSIONS = ("baseline", "fused")
PROFILING = {"on": (True,), "off": (False,), "both": (True, False)}
"""``--profiling``: phonetrain's OpenCL rows with the runner's profiling event per command
(its trace's device times; the study runs that way), without (``runner run --no-profiling``:
the host cost of a training loop that does not profile), or one row each."""
BATCH = 32
NUM_BATCHES = 8
LOSS_WINDOW = 10
"""Losses averaged at each end of a run by :func:`loss_falls`; also the number of first
losses compared with the reference by :func:`same_start`."""
START_TOLERANCE = 1e-3


# ---------------------------------------------------------------- one timer, one rule, stats

def time_steps(step: Callable[[int], float], warmup: int, iterations: int
               ) -> tuple[list[float], list[float]]:
    """Call ``step(i)`` (one whole training step that returns the loss as a Python float,
    i.e. after reading it back to the host) ``warmup + iterations`` times. Returns the wall
    time in ms of each timed call (``time.perf_counter``) and the losses of all calls."""
    ms: list[float] = []
    losses: list[float] = []
    for i in range(warmup + iterations):
        t0 = time.perf_counter()
        loss = step(i)
        t1 = time.perf_counter()
        losses.append(float(loss))
        if i >= warmup:
            ms.append((t1 - t0) * 1e3)
    return ms, losses


def loss_falls(losses: list[float], window: int = LOSS_WINDOW) -> bool | None:
    """The validity rule of a row: True when the mean of the last ``window`` losses is below
    the mean of the first ``window`` (non-finite losses: False); None when the run is
    shorter than ``2 * window`` iterations (no verdict)."""
    if len(losses) < 2 * window:
        return None
    if not all(math.isfinite(x) for x in losses):
        return False
    return float(np.mean(losses[-window:])) < float(np.mean(losses[:window]))


def summarize(ms: list[float], losses: list[float]) -> dict[str, Any]:
    """Median, p10, p90 (ms; numpy's linear percentiles) of the timed iterations, the losses'
    first/last window means and the validity verdict of :func:`loss_falls`."""
    p10, med, p90 = (float(v) for v in np.percentile(ms, [10, 50, 90]))
    w = min(LOSS_WINDOW, len(losses))
    return {"iterations": len(ms), "median_ms": med, "p10_ms": p10, "p90_ms": p90,
            "loss_first": float(np.mean(losses[:w])), "loss_last": float(np.mean(losses[-w:])),
            "loss_falls": loss_falls(losses), "losses_head": [float(v) for v in
                                                               losses[:LOSS_WINDOW]]}


# ---------------------------------------------------------------- shared inputs

def write_inputs(model_name: str, dataset: str, lr: float, root: Path
                 ) -> tuple[Path, list[float]]:
    """The batches (phonetrain's batch files, written under ``root`` for the runner) and the
    initial parameters of ``model_name``, also saved for the peer processes as one ``.npz``
    (``x`` float32 ``[NUM_BATCHES, BATCH, *input_shape]``, ``y`` int32 ``[NUM_BATCHES,
    BATCH]``, ``p:<layer>.<weight|bias>`` in PyTorch's layouts, ``layers`` the model's layer
    list as JSON). Returns the ``.npz`` path and the numpy reference's (phonetrain.reference)
    first :data:`LOSS_WINDOW` losses of that start, for :func:`same_start`."""
    from phonetrain import reference
    from phonetrain.data import write_batches
    from phonetrain.lowering import LowerSpec, init_params, write_plan_dir
    from phonetrain.models import get_model
    from phonetrain.plan import Plan

    m = get_model(model_name)
    doc = write_batches(dataset, BATCH, NUM_BATCHES, root, seed=0,
                        input_shape=m.input_shape, classes=m.classes)
    x = np.fromfile(root / doc["images"], "<f4").reshape(NUM_BATCHES, BATCH, *m.input_shape)
    y = np.fromfile(root / doc["labels"], "<i4").reshape(NUM_BATCHES, BATCH)
    layers = [_layer_doc(layer) for layer in m.layers]
    path = root / f"peer-inputs-{model_name}.npz"
    np.savez(path, x=x, y=y, layers=json.dumps(layers), classes=m.classes,
             **{f"p:{k}": v for k, v in init_params(m, 0).items()})
    spec = LowerSpec(model=model_name, batch_size=BATCH, backend="cpu", dataset=dataset,
                     num_batches=NUM_BATCHES, warmup=0, iterations=LOSS_WINDOW, seed=0, lr=lr,
                     plan_id=f"peers.reference.{model_name}", checkpoints=())
    plan = Plan.load(write_plan_dir(spec, root) / "plan.json")
    return path, [float(v) for v in reference.run_plan(plan, root).losses]


def same_start(losses: list[float], ref: list[float]) -> float:
    """The largest relative difference between a row's first losses and the reference's
    (:func:`write_inputs`): every row starts from the same parameters and batches, so a
    difference above :data:`START_TOLERANCE` means a different model, initialization, data
    or loss (float32 rounding alone stays orders of magnitude below)."""
    n = min(len(losses), len(ref))
    return max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(losses[:n], ref[:n]))


def read_inputs(path: str) -> dict[str, Any]:
    """The ``.npz`` of :func:`write_inputs` as ``{"x", "y", "layers", "classes", "params"}``."""
    z = np.load(path)
    return {"x": z["x"], "y": z["y"], "layers": json.loads(str(z["layers"])),
            "classes": int(z["classes"]),
            "params": {k[2:]: z[k] for k in z.files if k.startswith("p:")}}


# ---------------------------------------------------------------- peers (one function each)

def _layer_doc(layer) -> dict:
    """A layer as JSON for the peer processes: its type name and fields, a Residual's body
    as a list of such dicts."""
    doc = {"type": type(layer).__name__, **dataclasses.asdict(layer)}
    if "body" in doc:
        doc["body"] = [_layer_doc(inner) for inner in layer.body]
    return doc


CHAIN_LAYERS = {"Linear", "Conv2d", "ReLU", "MaxPool2d", "Flatten"}  # tinygrad's, MNN's builders


def _layer_types(layers: list[dict]) -> set[str]:
    return {t for s in layers for t in [s["type"], *_layer_types(s.get("body", []))]}


def _chain_only(peer: str, d: dict) -> None:
    """Skip a peer whose builder here knows only :data:`CHAIN_LAYERS` on a model with more."""
    extra = sorted(_layer_types(d["layers"]) - CHAIN_LAYERS)
    if extra:
        raise Skip(f"{peer}: no builder here for {', '.join(extra)} (PyTorch rows only)")


def torch_residual(body):
    """A PyTorch module computing ``body(x) + x``: phonetrain's Residual layer around the
    module ``body`` (PyTorch is imported here: it is optional)."""
    import torch.nn as tnn

    class _Residual(tnn.Module):
        def __init__(self, body):
            super().__init__()
            self.body = body

        def forward(self, x):
            return self.body(x) + x
    return _Residual(body)


def _torch_net(layers: list[dict], params: dict):
    """The PyTorch modules of a layer list (a Residual's body plus its input), parameters
    (and batch norm's running statistics) loaded from ``params`` by ``<layer>.<name>``."""
    import torch
    import torch.nn as tnn

    mods = []
    for s in layers:
        t = s["type"]
        m = (torch_residual(_torch_net(s["body"], params)) if t == "Residual" else
             tnn.Linear(s["in_features"], s["out_features"]) if t == "Linear" else
             tnn.Conv2d(s["in_channels"], s["out_channels"], s["kernel"], s["stride"],
                        s["pad"], bias=s.get("bias", True)) if t == "Conv2d" else
             tnn.Conv2d(s["channels"], s["channels"], 3, s["stride"], s["pad"],
                        groups=s["channels"], bias=False) if t == "DepthwiseConv2d" else
             tnn.BatchNorm2d(s["channels"], eps=s["eps"], momentum=s["momentum"])
             if t == "BatchNorm2d" else
             tnn.ReLU() if t == "ReLU" else tnn.ReLU6() if t == "ReLU6" else
             tnn.MaxPool2d(s["kernel"], s["stride"]) if t == "MaxPool2d" else
             tnn.Sequential(tnn.AdaptiveAvgPool2d(1), tnn.Flatten())
             if t == "GlobalAvgPool2d" else tnn.Flatten())
        if t != "Residual":
            held = dict(m.named_parameters())
            if t == "BatchNorm2d":
                held.update(running_mean=m.running_mean, running_var=m.running_var)
            for name, tensor in held.items():
                key = f"{s['name']}.{name}"
                if key in params:
                    with torch.no_grad():
                        tensor.copy_(torch.from_numpy(params[key].copy()))
        mods.append(m)
    return tnn.Sequential(*mods)


class Skip(Exception):
    """The peer or its device is not available here: a note row, not an error."""


def peer_torch(task: dict, d: dict) -> dict:
    """PyTorch eager on ``task["device"]`` (cpu|cuda), or one CUDA graph per step
    (``task["graphs"]``: captured once after a warm-up on a side stream, replayed)."""
    if importlib.util.find_spec("torch") is None:
        raise Skip("torch not installed (pip install -e .[peers])")
    import torch
    import torch.nn as tnn

    dev = task["device"]
    if dev == "cuda" and not torch.cuda.is_available():
        raise Skip("torch: no CUDA device")
    if dev == "cpu":
        torch.set_num_threads(task["threads"])
    # FP32 as phonetrain computes it: no TF32 in matmuls or convolutions
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    net = _torch_net(d["layers"], d["params"]).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=task["lr"])
    pin = dev == "cuda"  # pinned host memory: the copy in can overlap as PyTorch's docs advise
    hx = [torch.from_numpy(b).pin_memory() if pin else torch.from_numpy(b) for b in d["x"]]
    hy = [torch.from_numpy(b.astype(np.int64)) for b in d["y"]]
    hy = [b.pin_memory() if pin else b for b in hy]
    sx = torch.empty(hx[0].shape, device=dev)
    sy = torch.empty(hy[0].shape, dtype=torch.long, device=dev)
    lossf = tnn.CrossEntropyLoss()

    def fwd_bwd_update():
        opt.zero_grad(set_to_none=False)  # graphs need the grads to stay the same tensors
        loss = lossf(net(sx), sy)
        loss.backward()
        opt.step()
        return loss

    def copy_in(i):
        sx.copy_(hx[i % len(hx)], non_blocking=True)
        sy.copy_(hy[i % len(hy)], non_blocking=True)

    if task.get("graphs"):
        # PyTorch's capture recipe: warm up on a side stream, then capture one whole step;
        # the warm-up steps train too, so they count as iterations of the run
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        pre = []
        with torch.cuda.stream(side):
            for i in range(3):
                copy_in(i)
                pre.append(fwd_bwd_update().item())
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_loss = fwd_bwd_update()  # capture only: nothing runs here

        def step(i):
            copy_in(i + 3)
            graph.replay()
            return static_loss.item()
    else:
        pre = []

        def step(i):
            copy_in(i)
            return fwd_bwd_update().item()

    ms, losses = time_steps(step, task["warmup"], task["iterations"])
    out = {"version": torch.__version__, "losses_all": pre + losses, "ms": ms}
    if dev == "cuda":
        out["device_name"] = torch.cuda.get_device_name(0)
    else:
        out["threads"] = torch.get_num_threads()
    return out


def _tinygrad_cl_platform(want: str | None) -> str:
    """tinygrad's OpenCL backend opens the devices of the ICD loader's FIRST platform (PoCL
    where it is listed before a GPU's driver): fill its device list beforehand from the
    platform whose name contains ``want`` (case-insensitive), or, without ``want``, the first
    platform with a GPU device (else the first). Returns the platform's name."""
    import ctypes

    from tinygrad.runtime.autogen import opencl as cl
    from tinygrad.runtime.ops_cl import CLDevice

    n = ctypes.c_uint32()
    if cl.clGetPlatformIDs(0, None, n) != 0 or n.value == 0:
        raise Skip("tinygrad CL: no OpenCL platform")
    plats = (cl.cl_platform_id * n.value)()
    cl.clGetPlatformIDs(n.value, plats, None)

    def name(p) -> str:
        buf = ctypes.create_string_buffer(256)
        cl.clGetPlatformInfo(p, cl.CL_PLATFORM_NAME, 256, buf, None)
        return buf.value.decode(errors="replace")

    def devices(p, dtype) -> list:
        nd = ctypes.c_uint32()
        if cl.clGetDeviceIDs(p, dtype, 0, None, nd) != 0 or nd.value == 0:
            return []
        ids = (cl.cl_device_id * nd.value)()
        cl.clGetDeviceIDs(p, dtype, nd.value, ids, None)
        return ids

    if want:
        pick = [p for p in plats if want.lower() in name(p).lower()]
        if not pick:
            raise Skip(f"tinygrad CL: no OpenCL platform named like {want!r} "
                       f"(found: {', '.join(name(p) for p in plats)})")
    else:
        pick = [p for p in plats if len(devices(p, cl.CL_DEVICE_TYPE_GPU))] or list(plats)
    CLDevice.device_ids = devices(pick[0], cl.CL_DEVICE_TYPE_ALL)
    return name(pick[0])


def _find_nvrtc() -> str | None:
    """A libnvrtc for tinygrad's CUDA backend, which looks only in its own fixed folders
    unless NVRTC_PATH names one: the CUDA toolkit's, else the one a pip CUDA wheel (as
    PyTorch's) ships."""
    import glob
    pats = ["/usr/local/cuda*/lib64/libnvrtc.so*", "/usr/local/cuda*/targets/*/lib/libnvrtc.so*"]
    spec = importlib.util.find_spec("nvidia")
    for d in (spec.submodule_search_locations or []) if spec else []:
        pats += [f"{d}/cu*/lib/libnvrtc.so*", f"{d}/cuda_nvrtc/lib/libnvrtc.so*"]
    for pat in pats:
        hits = sorted(h for h in glob.glob(pat) if ".alt." not in h)
        if hits:
            return hits[-1]
    return None


def peer_tinygrad(task: dict, d: dict) -> dict:
    """tinygrad on ``task["device"]`` (CL, CUDA, CPU, ...), the step captured by TinyJit."""
    if importlib.util.find_spec("tinygrad") is None:
        raise Skip("tinygrad not installed (pip install -e .[peers])")
    _chain_only("tinygrad", d)
    if task["device"].split(":")[0] in ("CUDA", "NV") and not os.environ.get("NVRTC_PATH"):
        found = _find_nvrtc()
        if found:
            os.environ["NVRTC_PATH"] = found
    from importlib.metadata import version

    from tinygrad import Device, Tensor, TinyJit, nn
    from tinygrad.helpers import Context

    dev = task["device"]
    extra: dict[str, Any] = {}
    if dev.split(":")[0] == "CL":
        extra["platform"] = _tinygrad_cl_platform(task.get("cl_platform"))
    try:
        Device[dev]
    except Exception as e:  # noqa: BLE001  (a backend this host lacks: driver, compiler)
        raise Skip(f"tinygrad {dev}: {type(e).__name__}: {str(e).splitlines()[0][:160]}") \
            from None
    blocks: list[Callable] = []
    params = []
    for s in d["layers"]:
        t = s["type"]
        if t in ("Linear", "Conv2d"):
            layer = nn.Linear(s["in_features"], s["out_features"]) if t == "Linear" else \
                nn.Conv2d(s["in_channels"], s["out_channels"], s["kernel"], s["stride"],
                          s["pad"])
            layer.weight = Tensor(d["params"][f"{s['name']}.weight"], device=dev)
            layer.bias = Tensor(d["params"][f"{s['name']}.bias"], device=dev)
            params += [layer.weight, layer.bias]
            blocks.append(layer)
        elif t == "ReLU":
            blocks.append(Tensor.relu)
        elif t == "MaxPool2d":
            k, st = s["kernel"], s["stride"]
            blocks.append(lambda x, k=k, st=st: x.max_pool2d((k, k), st))
        else:
            blocks.append(lambda x: x.flatten(1))
    Tensor.realize(*params)
    opt = nn.optim.SGD(params, lr=task["lr"])

    @TinyJit
    def train_step(x, y):
        with Context(TRAINING=1):
            opt.zero_grad()
            h = x
            for b in blocks:
                h = b(h)
            loss = h.sparse_categorical_crossentropy(y).backward()
            return loss.realize(*opt.schedule_step())

    xs, ys = d["x"], d["y"].astype(np.int32)

    def step(i):
        x = Tensor(xs[i % len(xs)], device=dev).realize()
        y = Tensor(ys[i % len(ys)], device=dev).realize()
        return train_step(x, y).item()

    ms, losses = time_steps(step, task["warmup"], task["iterations"])
    dn = Device[dev]
    name = getattr(dn, "device_name", None) or getattr(dn, "arch", None)
    return {"version": version("tinygrad"), "losses_all": losses, "ms": ms,
            **({"device_name": str(name)} if name else {}), **extra}


def _mnn_layers(d: dict, mnn: Any, F: Any) -> list[tuple[dict, Any]]:
    """(layer dict, MNN module or None for a layer without parameters) of each layer of
    ``d``, its parameters set to phonetrain's initial ones."""
    layers: list[tuple[dict, Any]] = []
    for s in d["layers"]:
        t = s["type"]
        if t == "Linear":
            mod = mnn.linear(s["in_features"], s["out_features"])
        elif t == "Conv2d":
            # MNN's conv ignores `padding` unless the Caffe padding mode is set (the default
            # mode pads nothing: LeNet-5's conv1 would give 24x24 instead of 28x28)
            mod = mnn.conv(s["in_channels"], s["out_channels"], [s["kernel"]] * 2,
                           stride=[s["stride"]] * 2, padding=[s["pad"]] * 2,
                           padding_mode=F.Padding_Mode.CAFFE)
        else:
            mod = None
        if mod is not None:
            # phonetrain's (PyTorch's) layouts; MNN keeps a Linear's bias as [1, out]. Written
            # into the parameters in place: load_parameters() with F.const values makes them
            # constants, and opt.step(loss) then returns False (nothing trainable)
            for p in mod.parameters:
                w = d["params"][f"{s['name']}.weight"]
                key = "weight" if len(p.shape) > 1 and math.prod(p.shape) == w.size else "bias"
                p.write(np.ascontiguousarray(d["params"][f"{s['name']}.{key}"].reshape(p.shape)))
        layers.append((s, mod))
    return layers


def peer_mnn(task: dict, d: dict) -> dict:
    """MNN's Python training API (``MNN.nn`` modules, ``MNN.optim.SGD``) on its CPU backend
    with ``task["threads"]`` threads."""
    if importlib.util.find_spec("MNN") is None:
        raise Skip("MNN not installed (pip install -e .[peers])")
    _chain_only("MNN", d)
    import MNN
    import MNN.expr as F
    import MNN.nn as mnn
    import MNN.optim as optim

    F.set_thread_number(task["threads"])
    # MNN's default eager evaluation records no graph: opt.step(loss) then returns False and
    # changes no parameter. With lazy evaluation it trains; the checks in step() fail the row
    # otherwise (a step that returns False, or parameters unchanged after the first step).
    F.lazy_eval(True)
    layers = _mnn_layers(d, mnn, F)

    class Net(mnn.Module):
        def __init__(self):
            super().__init__()
            # attributes register the submodules (their parameters) with the optimizer
            for s, mod in layers:
                if mod is not None:
                    setattr(self, s["name"], mod)

        def forward(self, x):
            conv = any(s["type"] == "Conv2d" for s, _ in layers)
            if conv:
                x = F.convert(x, F.NC4HW4)  # MNN's convolutions and pooling work in NC4HW4
            for s, mod in layers:
                t = s["type"]
                if mod is not None:
                    x = mod(x)
                elif t == "ReLU":
                    x = F.relu(x)
                elif t == "MaxPool2d":
                    x = F.max_pool(x, [s["kernel"]] * 2, [s["stride"]] * 2)
                else:
                    if conv:
                        x = F.convert(x, F.NCHW)
                    x = F.reshape(x, [0, -1])
            return x

    net = Net()
    net.train(True)
    opt = optim.SGD(net, task["lr"], 0.0, 0.0)
    classes = d["classes"]
    xs, ys = d["x"], d["y"].astype(np.int32)
    first = next(mod for _, mod in layers if mod is not None)

    def weights():
        return [np.array(p.read(), copy=True) for p in first.parameters]

    before = weights()

    def step(i):
        x = F.const(xs[i % len(xs)], list(xs[0].shape), F.NCHW, F.float)
        y = F.const(ys[i % len(ys)], [xs.shape[1]], F.NCHW, F.int)
        prob = F.softmax(net.forward(x), 1)  # MNN's cross_entropy takes probabilities
        loss = mnn.loss.cross_entropy(prob, F.one_hot(y, classes, 1.0, 0.0))
        # read the loss BEFORE the step: under lazy evaluation a read after opt.step(loss)
        # evaluates the graph again with the updated parameters (the next step's loss on
        # this batch), not this step's loss (checked against PyTorch on the same start)
        value = float(np.asarray(loss.read()).reshape(-1)[0])
        if not opt.step(loss):
            raise RuntimeError("MNN opt.step(loss) returned False: no parameter was updated "
                               "(lazy evaluation off, or constant parameters)")
        if i == 0 and all(np.array_equal(a, b) for a, b in zip(before, weights())):
            raise RuntimeError("MNN: parameters unchanged after the first step")
        return value

    ms, losses = time_steps(step, task["warmup"], task["iterations"])
    return {"version": MNN.version(), "losses_all": losses, "ms": ms,
            "threads": task["threads"]}


def _exported_onnx(d: dict, path: Path) -> list[str]:
    """Export the PyTorch net of ``d`` (phonetrain's initial parameters) to ONNX at ``path``
    in training mode for one batch shape; returns the names of its trainable parameters."""
    import torch

    net = _torch_net(d["layers"], d["params"]).train()
    x = torch.from_numpy(d["x"][0])
    torch.onnx.export(net, (x,), str(path), input_names=["input"], output_names=["logits"],
                      export_params=True, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING, dynamo=False)
    return [name for name, _ in net.named_parameters()]


def peer_ort(task: dict, d: dict) -> dict:
    """ONNX Runtime on-device training (``onnxruntime.training.api``: the training API phone
    apps ship) on the CPU with ``task["threads"]`` intra-op threads. Its artifacts
    (training, eval and optimizer models, checkpoint) come from the model exported by
    PyTorch with phonetrain's initial parameters, ``generate_artifacts`` with softmax
    cross-entropy and SGD (ORT's SGD has no momentum), as ONNX Runtime's on-device training
    tutorial builds them (onnxruntime.ai/docs/api/python/on_device_training)."""
    for mod in ("onnxruntime", "onnx", "torch"):
        if importlib.util.find_spec(mod) is None:
            raise Skip(f"{mod} not installed (pip install -e .[peers])")
    import onnx
    from onnxruntime import SessionOptions
    from onnxruntime.training import artifacts
    from onnxruntime.training.api import CheckpointState, Module, Optimizer
    import onnxruntime

    work = Path(tempfile.mkdtemp(prefix="ort-"))
    names = _exported_onnx(d, work / "model.onnx")
    artifacts.generate_artifacts(onnx.load(str(work / "model.onnx")), requires_grad=names,
                                 frozen_params=[], loss=artifacts.LossType.CrossEntropyLoss,
                                 optimizer=artifacts.OptimType.SGD,
                                 artifact_directory=str(work))
    so = SessionOptions()
    so.intra_op_num_threads = task["threads"]
    so.inter_op_num_threads = 1
    state = CheckpointState.load_checkpoint(str(work / "checkpoint"))
    # no eval model: ORT 1.19 cannot load the eval graph of a model exported in training
    # mode with batch norm (its BatchNormalization keeps the training outputs)
    module = Module(str(work / "training_model.onnx"), state, None, device="cpu",
                    session_options=so)
    opt = Optimizer(str(work / "optimizer_model.onnx"), module)
    opt.set_learning_rate(task["lr"])
    module.train()
    xs = [np.ascontiguousarray(b) for b in d["x"]]
    ys = [b.astype(np.int64) for b in d["y"]]

    def step(i):
        loss = module(xs[i % len(xs)], ys[i % len(ys)])   # forward, loss and backward
        opt.step()
        module.lazy_reset_grad()
        return float(np.asarray(loss).reshape(-1)[0])

    ms, losses = time_steps(step, task["warmup"], task["iterations"])
    return {"version": onnxruntime.__version__, "losses_all": losses, "ms": ms,
            "threads": task["threads"]}


def peer_executorch(task: dict, d: dict) -> dict:
    """ExecuTorch's training extension (``executorch.extension.training``): the net with its
    loss exported by ``torch.export``, the joint forward-backward graph
    (``_export_forward_backward``) lowered to an ExecuTorch program, run by its portable
    CPU kernels, the parameters updated by ExecuTorch's own SGD (``get_sgd_optimizer``), as
    ExecuTorch's training example builds it (extension/training/examples/XOR)."""
    for mod in ("executorch", "torch"):
        if importlib.util.find_spec(mod) is None:
            raise Skip(f"{mod} not installed (pip install -e .[peers])")
    import torch
    from executorch.exir import to_edge
    from executorch.extension.training import (_load_for_executorch_for_training_from_buffer,
                                               get_sgd_optimizer)
    from torch.export import export
    from torch.export.experimental import _export_forward_backward
    from importlib.metadata import version

    net = _torch_net(d["layers"], d["params"]).train()

    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = net
            self.loss = torch.nn.CrossEntropyLoss()

        def forward(self, x, y):   # ExecuTorch's joint graph: the loss is output 0
            logits = self.net(x)
            return self.loss(logits, y), logits.detach().argmax(dim=1)

    xs = [torch.from_numpy(np.ascontiguousarray(b)) for b in d["x"]]
    ys = [torch.from_numpy(b.astype(np.int64)) for b in d["y"]]
    ep = _export_forward_backward(export(WithLoss(), (xs[0], ys[0]), strict=True))
    prog = to_edge(ep).to_executorch()
    mod = _load_for_executorch_for_training_from_buffer(prog.buffer)
    # its parameters are readable only after one forward-backward; that call computes
    # gradients and changes no parameter (only the optimizer's step does)
    mod.forward_backward("forward", (xs[0], ys[0]))
    params = mod.named_parameters()
    opt = get_sgd_optimizer(params, task["lr"], 0, 0, 0, False)

    def step(i):
        out = mod.forward_backward("forward", (xs[i % len(xs)], ys[i % len(ys)]))
        opt.step(mod.named_gradients())
        return float(out[0])

    ms, losses = time_steps(step, task["warmup"], task["iterations"])
    return {"version": version("executorch"), "losses_all": losses,
            "ms": ms, "threads": 1}


FRAMEWORKS = {"torch": "PyTorch", "tinygrad": "tinygrad", "mnn": "MNN", "ort": "ONNX Runtime",
              "executorch": "ExecuTorch"}
PEER_FUNCS = {"torch": peer_torch, "tinygrad": peer_tinygrad, "mnn": peer_mnn, "ort": peer_ort,
              "executorch": peer_executorch}


def peer_child(task: dict, result_path: str) -> None:
    """Run one peer row in this process and write its result JSON to ``result_path``."""
    try:
        out = PEER_FUNCS[task["peer"]](task, read_inputs(task["inputs"]))
        ms, losses = out.pop("ms"), out.pop("losses_all")
        doc = {"status": "ok", **summarize(ms, losses), **out}
    except Skip as e:
        doc = {"status": "skipped", "note": str(e)}
    except Exception as e:  # noqa: BLE001  (an error row, never a crash of the benchmark)
        import traceback
        traceback.print_exc()
        msg = (str(e).strip().splitlines() or [""])[-1][:300]
        doc = {"status": "error", "note": f"{type(e).__name__}: {msg}"}
    Path(result_path).write_text(json.dumps(doc))


def run_peer(a, task: dict, tmp: Path) -> dict:
    """One peer row in a child process (``a.python``): its own threads, its own crash."""
    res = tmp / f"result-{os.getpid()}-{time.monotonic_ns()}.json"
    env = dict(os.environ)
    if task["peer"] == "tinygrad" and a.nvrtc_path:
        env["NVRTC_PATH"] = a.nvrtc_path
    cmd = [a.python, str(Path(__file__).resolve()), "--_child", json.dumps(task), "--_result",
           str(res)]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True,
                           timeout=a.row_timeout_s)
    except subprocess.TimeoutExpired:
        return {"status": "error", "note": f"no result within {a.row_timeout_s} s"}
    if not res.exists():
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1][:300]
        return {"status": "error", "note": f"exit {p.returncode}: {tail}"}
    doc = json.loads(res.read_text())
    if doc["status"] == "error" and p.stderr:
        sys.stderr.write(p.stderr[-3000:])
    doc["wall_s"] = round(time.time() - t0, 1)
    return doc


def peer_tasks(a) -> list[dict]:
    """The peer rows requested: (peer, backend label, task settings)."""
    out = []
    if "torch" in a.peers:
        out += [{"peer": "torch", "device": "cpu", "label": f"PyTorch CPU eager, {a.threads} "
                 "threads"},
                {"peer": "torch", "device": "cuda", "label": "PyTorch CUDA eager"},
                {"peer": "torch", "device": "cuda", "graphs": True,
                 "label": "PyTorch CUDA graphs"}]
    if "tinygrad" in a.peers:
        for dev in a.tinygrad_devices:
            out.append({"peer": "tinygrad", "device": dev, "cl_platform": a.tinygrad_cl_platform,
                        "label": f"tinygrad {dev}, TinyJit"})
    if "mnn" in a.peers:
        out.append({"peer": "mnn", "device": "cpu",
                    "label": f"MNN CPU, {a.threads} threads, lazy evaluation"})
    if "ort" in a.peers:
        out.append({"peer": "ort", "device": "cpu",
                    "label": f"ONNX Runtime training CPU, {a.threads} threads"})
    if "executorch" in a.peers:
        out.append({"peer": "executorch", "device": "cpu",
                    "label": "ExecuTorch training, portable kernels"})
    return out


# ---------------------------------------------------------------- phonetrain

class Phonetrain:
    """phonetrain's rows: plans lowered by the package, run by the runner, verified per step."""

    def __init__(self, a, root: Path):
        from phonetrain.devices.toolchains import build_runner
        from phonetrain.runner import Runner

        self.a, self.root = a, root
        self.binary = Path(a.runner) if a.runner else build_runner(root / "build")
        self.info = Runner.local_binary(self.binary, root).info()
        self.selection: list[dict] = []
        self.on_change: Callable[[], None] = lambda: None  # a selection row was added

    def platforms(self) -> list[str]:
        """The requested OpenCL platforms' names (all of them for ``--platforms all``)."""
        found = [p["name"] for p in self.info.get("platforms") or []]
        if self.a.platforms == ["all"]:
            return found
        return [next((f for f in found if w.lower() in f.lower()), w) for w in self.a.platforms]

    def run(self, *args) -> dict:
        """:meth:`_run`, with anything it raises (a bad ``--kernel``, a lowering error) made
        an error row instead of the end of the benchmark."""
        try:
            return self._run(*args)
        except Exception as e:  # noqa: BLE001
            return {"status": "error", "note": f"{type(e).__name__}: {e}"[:300]}

    def _run(self, model: str, backend: str, platform: str | None, placement: str | None,
             version: str, iterations: int, warmup: int, tag: str,
             profiling: bool = True) -> dict:
        """Lower, stage, run and verify one plan (OpenCL without profiling events when
        ``profiling`` is false); returns the row's fields."""
        from phonetrain import reference
        from phonetrain.kernels import load_version, stage_kernels, tuning
        from phonetrain.layout import plan_dir_rel
        from phonetrain.lowering import LowerSpec, write_plan_dir
        from phonetrain.plan import Plan
        from phonetrain.runner import DeviceSelector, MissingLibraryError, Runner, RunnerError

        pl, tr = PLACEMENTS[placement] if placement else (None, None)
        pid = f"peers.{tag}.{model}.{backend}.{version}.{placement or 'host'}" + \
            ("" if profiling else ".unprofiled")
        spec = LowerSpec(model=model, batch_size=BATCH, backend=backend, placement=pl,
                         transfer=tr, kernel=version, dataset=self.a.dataset,
                         num_batches=NUM_BATCHES, warmup=warmup, iterations=iterations,
                         seed=0, lr=self.a.lr, plan_id=pid, splitk_groups=self.a.splitk_groups)
        pdir = write_plan_dir(spec, self.root)
        tuned = None
        tj = tuning.tuning_files(Path(self.a.tuning_dir) / version / "tuning") \
            if self.a.tuning_dir else []
        if backend == "opencl":
            stage_kernels(version, self.root)
            if tj and tuning.tunable(version):
                plan, tuned = tuning.tune_plan(Plan.load(pdir / "plan.json"),
                                               load_version(version), tuning.load_tunings(tj))
                plan.save(pdir / "plan.json")
        sel = DeviceSelector(platform=platform) if backend == "opencl" else None
        r = Runner.local_binary(self.binary, self.root, sel, timeout_s=self.a.row_timeout_s)
        out = self.root / "out" / pid
        try:
            run = r.run(f"{plan_dir_rel(pid)}/plan.json", out,
                        threads=self.a.threads if backend == "cpu" else 0, profiling=profiling)
        except MissingLibraryError as e:
            return {"status": "skipped", "note": e.message[:200]}
        except RunnerError as e:
            return {"status": "error", "note": (str(e).splitlines() or [""])[0][:300]}
        v = reference.verify_run_dir(Plan.load(pdir / "plan.json"), self.root, out)
        ok = bool(v.get("ok")) and v.get("max_abs_err") is not None and \
            math.isfinite(v["max_abs_err"])
        ms = [i["wall_ms"] for i in run["iters"] if not i["warmup"]]
        losses = [i["loss"] for i in run["iters"]]
        steps = [s["iteration"] for s in v["steps"]]
        verdict = (f"verified per step (iterations {steps})" if ok else
                   f"VERIFY FAILED (iterations {v.get('failed_iterations')})")
        from phonetrain import __version__
        return {"status": "ok", **summarize(ms, losses), "verified": ok, "verify": verdict,
                "version": __version__,
                "kernel": version if backend == "opencl" else None,
                "tuned_class": tuned, "device_name": (run.get("device") or {}).get("name"),
                "threads": self.a.threads if backend == "cpu" else None}

    def best_version(self, model: str, platform: str | None) -> tuple[str | None, str]:
        """The fastest per-step-verified kernel version of ``model`` (short runs): on an OpenCL
        ``platform`` of ``--versions`` in the first requested placement, or ``--kernel`` when it
        names one; on the CPU backend (``platform`` None) of ``CPU_VERSIONS``, or
        ``--cpu-kernel`` when it names one."""
        cpu = platform is None
        given, flag = (self.a.cpu_kernel, "--cpu-kernel") if cpu else (self.a.kernel, "--kernel")
        if given != "best":
            return given, f"given by {flag}"
        backend, placement = ("cpu", None) if cpu else ("opencl", self.a.placements[0])
        n = max(2 * LOSS_WINDOW, min(50, self.a.iterations))
        tried = []
        for v in CPU_VERSIONS if cpu else self.a.versions:
            untuned = None if cpu else self.untuned(v)
            r = ({"status": "skipped", "note": untuned} if untuned else
                 self.run(model, backend, platform, placement, v, n, self.a.warmup, "select"))
            tried.append({"model": model, "platform": platform or "cpu", "candidate": v, **r})
            self.selection.append(tried[-1])
            self.on_change()
            print(f"select {model} {platform or 'cpu'} {v}: {r['status']} "
                  f"{r.get('median_ms', r.get('note'))}", file=sys.stderr, flush=True)
        good = [t for t in tried if t["status"] == "ok" and t["verified"]]
        if not good:
            return None, "no version ran verified: " + "; ".join(
                f"{t['candidate']} {t.get('note') or 'not verified'}" for t in tried)
        best = min(good, key=lambda t: t["median_ms"])
        where = "" if cpu else f"{placement}, "
        skipped = [t["candidate"] for t in tried if t["status"] == "skipped"]
        return best["candidate"], (f"fastest verified of {len(good)}/{len(tried)} versions "
                                 f"({where}{n} iterations)" +
                                 (f"; {', '.join(skipped)} skipped" if skipped else ""))

    def untuned(self, version: str) -> str | None:
        """Why the selection skips ``version``: a tunable version (tuning candidates besides
        its defaults) without tuning files under ``--tuning-dir`` would run its untuned
        defaults, tens of times slower on a GPU than its tuned form (``regblock``: 43-99 ms
        per step on an H200) and no candidate for the fastest; None when it runs (tuned, not
        tunable, or ``--untuned``)."""
        from phonetrain.kernels import tuning

        if self.a.untuned or not tuning.tunable(version):
            return None
        if self.a.tuning_dir and tuning.tuning_files(Path(self.a.tuning_dir) / version /
                                                     "tuning"):
            return None
        return (f"skipped: tunable and untuned (no {self.a.tuning_dir or '--tuning-dir'}/"
                f"{version}/tuning/*.json; --untuned runs its defaults)")

    def cpu_row(self, model: str) -> dict:
        """The CPU backend's row: the chosen version (``--cpu-kernel``) at ``--threads``."""
        a = self.a
        row = {"framework": "phonetrain", "backend": f"CPU backend (OpenMP), {a.threads} "
               "threads", "model": model}
        version, why = self.best_version(model, None)
        if version is None:
            return {**row, "status": "error", "note": why}
        r = self.run(model, "cpu", None, None, version, a.iterations, a.warmup, "t")
        if r.get("status") == "ok":
            r["note"] = f"kernel {version}, {why}"
        return {**row, **r}

    def rows(self, model: str) -> Iterator[dict]:
        """The CPU row and one row per requested platform x placement, each as it
        completes."""
        a = self.a
        yield self.cpu_row(model)
        plats = self.platforms()
        if not plats:
            yield {"framework": "phonetrain", "backend": "OpenCL", "model": model,
                   "status": "skipped", "note": "no OpenCL platform: "
                   f"{self.info.get('opencl_error')}"}
        for p in plats:
            version, why = self.best_version(model, p)
            for pl in a.placements:
                for prof in PROFILING[a.profiling]:
                    yield self.opencl_row(model, p, pl, version, why, prof)

    def opencl_row(self, model: str, platform: str, placement: str, version: str | None,
                   why: str, profiling: bool) -> dict:
        """One OpenCL row: the chosen version on ``platform`` x ``placement``, with or
        without the runner's profiling events (the pipelined placement needs them)."""
        a = self.a
        row = {"framework": "phonetrain", "model": model, "backend": f"OpenCL {platform}, "
               f"{placement}" + ("" if profiling else ", no profiling")}
        if version is None:
            return {**row, "status": "error", "note": why}
        if not profiling and placement.startswith("pipelined"):
            return {**row, "status": "skipped",
                    "note": "the pipelined placement's wait lists need profiling events"}
        r = self.run(model, "opencl", platform, placement, version, a.iterations, a.warmup,
                     "t", profiling)
        if r.get("kernel"):
            r["note"] = f"kernel {version}" + (f" tuned ({r['tuned_class']})"
                                              if r.get("tuned_class") else "") + f", {why}"
        return {**row, **r}


# ---------------------------------------------------------------- facts, table, main

def host_facts(pt: Phonetrain | None) -> dict:
    """CPU model, logical cores, load average, GPUs (nvidia-smi) and OpenCL platforms."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpus: list[str] = []
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        gpus = [g.strip() for g in p.stdout.splitlines() if g.strip()]
    except (OSError, subprocess.TimeoutExpired):
        pass
    cl = []
    if pt is not None:
        cl = [f"{p['name']} {p.get('version', '')}: "
              + ", ".join(d.get("name", "?") for d in p.get("devices", []))
              for p in pt.info.get("platforms") or []]
    return {"cpu_model": cpu, "logical_cores": os.cpu_count(), "gpus": gpus,
            "opencl": cl, "os": platform.platform()}


def phonetrain_commit(copied_from: str | None = None) -> str:
    """The revision of the phonetrain checkout whose package this script imports (its own
    ``src/``), not of whatever repository encloses the working folder: ``git rev-parse`` of
    that checkout, ``-dirty`` with edits; a copy without its own ``.git`` (inside another
    repository, say) is ``not a git checkout, sources <hash>``
    (:func:`phonetrain.results.provenance.git_rev`), followed by ``, copied from
    <copied_from>`` when the copier named the commit it copied (``--source-commit``)."""
    from phonetrain.results.provenance import NOT_GIT, git_rev
    rev = git_rev()
    if copied_from and rev.startswith(NOT_GIT):
        return f"{rev}, copied from {copied_from}"
    return rev


def fmt_row(r: dict) -> str:
    """One markdown row."""
    model = "MLP 784-256-128-16" if r["model"].startswith("mlp_784") else \
        "LeNet-5" if r["model"] == "lenet5" else r["model"]
    ver = r.get("version") or ""
    if r["status"] != "ok":
        return (f"| {r['framework']} {ver} | {r['backend']} | {model} | | | | "
                f"{r['status']} | {r.get('note', '')} |")
    valid = {True: "loss falls", False: "INVALID: loss does not fall",
             None: "too short to judge"}[r["loss_falls"]]
    err = r.get("start_rel_err")
    if err is not None:
        valid += (f"; same start ({err:.0e})" if err <= START_TOLERANCE else
                  f"; INVALID: first losses differ from the reference by {err:.1e}")
    if r["framework"] == "phonetrain":
        valid += "; " + r["verify"]
    note = "; ".join(x for x in (r.get("note"), r.get("platform") and
                                 f"platform {r['platform']}", r.get("device_name")) if x)
    return (f"| {r['framework']} {ver} | {r['backend']} | {model} | {r['median_ms']:.3f} "
            f"| {r['p10_ms']:.3f}-{r['p90_ms']:.3f} | {r['loss_first']:.3f} -> "
            f"{r['loss_last']:.3f} | {valid} | {note} |")


TABLE_HEAD = ("| framework | backend | model | median ms | p10-p90 ms | loss first 10 -> "
              "last 10 (mean) | status | notes |\n|---|---|---|---|---|---|---|---|")


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--peers", default=",".join(PEERS), help=f"subset of {','.join(PEERS)}")
    ap.add_argument("--threads", type=int, default=0,
                    help="CPU threads of phonetrain's CPU backend, PyTorch CPU and MNN (0: the "
                    "CPUs this process may use, phonetrain.devices.cpus)")
    ap.add_argument("--iterations", type=int, default=200, help="timed iterations per row")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--quick", action="store_true",
                    help="smoke test: 20 timed iterations after 5 warm-up")
    ap.add_argument("--lr", type=float, default=0.05, help="SGD learning rate (the plans')")
    ap.add_argument("--dataset", default="synthetic",
                    help="phonetrain dataset of the batches (synthetic needs only numpy; "
                         "digits needs scikit-learn and scipy)")
    ap.add_argument("--platforms", default="all",
                    help="phonetrain OpenCL platforms (name substrings, comma-separated), "
                         "'all' or 'none'")
    ap.add_argument("--placements", default=",".join(PLACEMENTS))
    ap.add_argument("--profiling", choices=sorted(PROFILING), default="both",
                    help="phonetrain's OpenCL rows with the runner's profiling events (on, the "
                    "study's way), without them (off: runner --no-profiling) or both")
    ap.add_argument("--kernel", default="best",
                    help="phonetrain kernel version, or 'best': the fastest verified of "
                         "--versions per model and platform")
    ap.add_argument("--versions", default=",".join(VERSIONS))
    ap.add_argument("--cpu-kernel", default="best", choices=("best", *CPU_VERSIONS),
                    help="the CPU row's lowering, or 'best': the fastest verified of "
                         f"{', '.join(CPU_VERSIONS)} per model")
    ap.add_argument("--splitk-groups", type=int, default=0, metavar="N",
                    help="LowerSpec.splitk_groups of phonetrain's plans: a fused convolution "
                    "update with long, few weight-gradient sums is split (split K) to reach N "
                    "work-groups; 1024 suits an H200-class GPU, 0 (default) never splits, "
                    "the right choice for CPUs/PoCL and phone GPUs")
    ap.add_argument("--tuning-dir", help="DIR/<version>/tuning/*.json: the workflow's tuning "
                    "(results/build/<device>/kernels/) applied to tunable versions")
    ap.add_argument("--untuned", action="store_true",
                    help="--kernel best: also try tunable versions that have no tuning under "
                    "--tuning-dir, with their defaults (skipped otherwise)")
    ap.add_argument("--runner", help="runner binary (default: build one with cc)")
    ap.add_argument("--source-commit", metavar="REV",
                    help="the commit a copy of the tree without its .git was made from: "
                    "recorded beside its sources hash")
    ap.add_argument("--tinygrad-devices", default="CL,CUDA")
    ap.add_argument("--tinygrad-cl-platform",
                    help="OpenCL platform (name substring) for tinygrad's CL backend; "
                         "default: the first with a GPU device")
    ap.add_argument("--nvrtc-path", default=os.environ.get("NVRTC_PATH"),
                    help="libnvrtc.so for tinygrad's CUDA backend (NVRTC_PATH)")
    ap.add_argument("--python", default=sys.executable,
                    help="Python of the peer processes (one with the peers installed)")
    ap.add_argument("--row-timeout-s", type=float, default=600.0)
    ap.add_argument("--json", help="write every row and the header facts here")
    ap.add_argument("--_child", help=argparse.SUPPRESS)
    ap.add_argument("--_result", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.threads <= 0:
        from phonetrain.devices.cpus import usable_cpus
        a.threads = usable_cpus()
    if a.quick:
        a.iterations, a.warmup = 20, 5
    for key in ("models", "peers", "placements", "versions", "tinygrad_devices", "platforms"):
        setattr(a, key, [x for x in getattr(a, key).split(",") if x])
    bad = set(a.peers) - set(PEERS)
    if bad:
        ap.error(f"--peers: unknown {sorted(bad)}; use a subset of {','.join(PEERS)}")
    bad = set(a.placements) - set(PLACEMENTS)
    if bad:
        ap.error(f"--placements: unknown {sorted(bad)}; use a subset of {','.join(PLACEMENTS)}")
    if a.platforms == ["none"]:
        a.platforms = []
    return a


class RowLog:
    """The rows of one run, kept as they complete: each row is printed as its markdown line
    at once (stdout flushed) and, with ``--json``, the whole document is rewritten atomically
    (:func:`phonetrain.io.write_json`) after every row and every kernel-selection run, with
    ``"finished": false`` until the end. A run killed half-way leaves every row it finished
    in its JSON and its output."""

    def __init__(self, a, header: dict, selection: Callable[[], list[dict]]):
        self.a, self.header, self.selection = a, header, selection
        self.rows: list[dict] = []

    def add(self, r: dict, ref: list[float] | None = None) -> None:
        """Keep row ``r`` (its same-start error against ``ref``, the reference's first
        losses, where it ran); print and save."""
        if ref is not None and r["status"] == "ok":
            r["start_rel_err"] = same_start(r["losses_head"], ref)
        self.rows.append(r)
        print(fmt_row(r), flush=True)
        self.save()

    def save(self, finished: bool = False) -> None:
        """Write the JSON document (``--json``) as it stands."""
        if not self.a.json:
            return
        from phonetrain.io import write_json
        host = dict(self.header["host"], loadavg_now=list(os.getloadavg()))
        write_json({**self.header, "host": host, "finished": finished, "rows": self.rows,
                    "kernel_selection": self.selection()}, Path(self.a.json))


def header_lines(a, command: str, started: datetime.datetime, host: dict,
                 versions: dict) -> str:
    """The markdown lines above the table: command, date, host, versions, settings."""
    return (f"- command: `{command}`\n- date: {started:%Y-%m-%d %H:%M} UTC\n"
            f"- host: {host['cpu_model']}, {host['logical_cores']} logical cores, threads "
            f"{a.threads}; GPUs: {', '.join(host['gpus']) or 'none (nvidia-smi)'}; OpenCL: "
            f"{'; '.join(host['opencl']) or 'none'}\n"
            f"- load average (1/5/15 min) at the start "
            f"{[round(x, 2) for x in host['loadavg_start']]}\n"
            f"- versions: {', '.join(f'{k} {v}' for k, v in versions.items())}\n"
            f"- batch {BATCH}, {a.dataset} data ({NUM_BATCHES} batches cycled), SGD lr {a.lr}, "
            f"{a.iterations} timed iterations after {a.warmup} warm-up; valid = mean of the last "
            f"{LOSS_WINDOW} losses below the mean of the first {LOSS_WINDOW} and the first "
            f"{LOSS_WINDOW} losses within {START_TOLERANCE:g} (relative) of the numpy "
            "reference's (same start)\n"
            + (f"- phonetrain's fused convolution updates split K to {a.splitk_groups} "
               "work-groups (--splitk-groups)\n" if a.splitk_groups else "")
            + ("- rows are printed as they complete; the JSON (--json) is rewritten after "
               "each\n" if a.json else ""))


def main(argv: list[str] | None = None) -> int:
    # this checkout's phonetrain, in the peer processes too (their --python may not have it)
    sys.path.insert(0, str(REPO / "src"))
    a = parse_args(sys.argv[1:] if argv is None else argv)
    if a._child:
        peer_child(json.loads(a._child), a._result)
        return 0
    started = datetime.datetime.now(datetime.timezone.utc)
    load_start = list(os.getloadavg())
    for module, pip_name in (("numpy", "numpy"), ("yaml", "pyyaml")):
        if importlib.util.find_spec(module) is None:
            sys.exit(f"peers.py: {pip_name} is missing; phonetrain's lowering needs it "
                     f"(pip install {pip_name}, or carry its wheel to this machine)")
    root = Path(tempfile.mkdtemp(prefix="phonetrain-peers-"))
    pt, failed = None, None
    if "phonetrain" in a.peers:
        try:
            pt = Phonetrain(a, root)
        except Exception as e:  # noqa: BLE001  (no compiler, no runner: an error row)
            failed = {"framework": "phonetrain", "backend": "runner", "model": "-",
                      "status": "error", "note": f"{type(e).__name__}: {e}"[:300]}
    from phonetrain import __version__ as pt_version
    host = host_facts(pt)
    host["loadavg_start"] = load_start
    versions = {"phonetrain": f"{pt_version} ({phonetrain_commit(a.source_commit)})",
                "python": platform.python_version(), "numpy": np.__version__,
                "peer python": a.python}
    command = "python " + " ".join(shlex.quote(x) for x in
                                   [os.path.relpath(__file__, Path.cwd())] + sys.argv[1:])
    header = {"command": command, "date": started.isoformat(), "host": host,
              "versions": versions, "iterations": a.iterations, "warmup": a.warmup,
              "batch": BATCH, "dataset": a.dataset, "lr": a.lr,
              "splitk_groups": a.splitk_groups}
    log = RowLog(a, header, lambda: pt.selection if pt else [])
    if pt is not None:
        pt.on_change = log.save
    print(header_lines(a, command, started, host, versions))
    print(TABLE_HEAD, flush=True)
    if failed:
        log.add(failed)
    tasks = peer_tasks(a)
    for model in a.models:
        inputs, ref = write_inputs(model, a.dataset, a.lr, root)
        for r in pt.rows(model) if pt is not None else ():
            log.add(r, ref)
        for t in tasks:
            task = {**t, "model": model, "inputs": str(inputs), "threads": a.threads,
                    "lr": a.lr, "warmup": a.warmup, "iterations": a.iterations}
            fw = FRAMEWORKS[t["peer"]]
            r = run_peer(a, task, root)
            print(f"{fw} {t['label']} {model}: {r['status']} "
                  f"{r.get('median_ms', r.get('note'))}", file=sys.stderr, flush=True)
            if r.get("version"):
                versions.setdefault(fw, r["version"])
            log.add({"framework": fw, "backend": t["label"], "model": model, **r}, ref)
    for p in sorted(set(PEERS) - set(a.peers)):
        log.add({"framework": p, "backend": "-", "model": "-", "status": "skipped",
                 "note": "not requested (--peers)"})
    host["loadavg_end"] = list(os.getloadavg())
    print(f"\n- load average (1/5/15 min) at the end {[round(x, 2) for x in host['loadavg_end']]}"
          f"\n- versions: {', '.join(f'{k} {v}' for k, v in versions.items())}")
    log.save(finished=True)
    rows = log.rows
    bad = [r for r in rows if r["status"] == "error" or r.get("loss_falls") is False
           or r.get("verified") is False or r.get("start_rel_err", 0) > START_TOLERANCE]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
