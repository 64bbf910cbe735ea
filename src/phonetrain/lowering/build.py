"""Lowering of one training step: layers -> kernel steps -> placement-specific plan.

Tensor names: ``input``, ``labels``; ``<layer>.weight``/``.bias`` (params), each with
``.grad`` and ``.momentum``; ``<layer>.out`` (activations) and ``<tensor>.grad`` for the
gradient of any activation; conv scratch ``<layer>.col``, ``<layer>.out_cnhw`` (+ ``.grad``),
pool scratch ``<layer>.argmax`` (int); ``loss.rows`` and ``loss``. Every step is tagged with
its layer (``input``/``loss`` for batch and loss traffic) and phase. Each layer type's kernel
sequence is the one ``src/kernels/README.md`` gives (Linear: gemm_nt + bias_add; Conv2d:
im2col + gemm_nn + swap01 + bias_add, or conv2d_fwd + bias_add where the device's tuning
chose the direct convolution; backward mirrors it).
"""

from __future__ import annotations

import math
from pathlib import Path

from .. import data as datasets
from ..kernels.tuning import conv_key
from ..kernels import (GEMM_KERNELS, KERNEL_ARGS, KERNELS_ROOT, KernelVersion, bind_args,
                       buffer_access, geometry, kernel_flops, kernels_mentioned, load_version,
                       mark_image_args, resolve_sources)
from ..models import Conv2d, Flatten, Linear, MaxPool2d, Model, ReLU, get_model
from ..layout import plan_dir_rel
from ..plan import Batch, Plan, Program, Step, Tensor
from .spec import LowerError, LowerSpec


class _Builder:
    """Accumulates tensors and compute steps; kernels get FLOPs, bytes and geometry."""

    def __init__(self, version: KernelVersion, conv_lowering: dict[str, str] | None = None):
        self.version = version
        self.conv_lowering = conv_lowering or {}   # conv_key -> "im2col" | "direct"
        self.tensors: list[Tensor] = []
        self.steps: list[Step] = []
        self.params: dict[str, list[int]] = {}   # layer -> [weight, bias] ids
        self.grads: dict[str, list[int]] = {}    # layer -> [dweight, dbias] ids
        self.states: list[tuple[int, int, int]] = []  # (param, grad, momentum) ids
        self.saved: dict[str, int] = {}          # forward tensors backward needs (col, argmax)

    def tensor(self, name: str, shape, role: str, dtype: str = "f32", init=None) -> int:
        t = Tensor(id=len(self.tensors), name=name, shape=[int(s) for s in shape], role=role,
                   dtype=dtype, init=init or {"kind": "zeros"})
        self.tensors.append(t)
        return t.id

    def kernel(self, name: str, values: list, layer: str, phase: str) -> None:
        """Append a launch; ``values`` follow the ABI order (buffers as tensor ids)."""
        args = []
        for spec, v in zip(KERNEL_ARGS[name], values, strict=True):
            kind = spec.split(":")[0]
            args.append({"i": int(v)} if kind == "i" else
                        {"f": float(v)} if kind == "f" else {"t": int(v)})
        bound = bind_args(name, args)
        mark_image_args(name, args, self.version, lambda t: self.tensors[t].numel)
        access = buffer_access(name, bound)
        nbytes = sum(self.tensors[bound[a]].size_bytes * (2 if acc == "rw" else 1)
                     for a, acc in access.items())
        glob, local = geometry(name, bound, self.version)
        self.steps.append(Step(op="kernel", name=name, args=args, global_size=glob,
                               local_size=local, flops=kernel_flops(name, bound),
                               bytes=nbytes, layer=layer, phase=phase))


def _lower_forward(b: _Builder, layer, x: int, batch: int) -> int:
    """Emit the forward kernels of ``layer`` on activation ``x``; return the output id."""
    xs = b.tensors[x].shape
    if isinstance(layer, Flatten):
        return x
    if isinstance(layer, ReLU):
        y = b.tensor(f"{layer.name}.out", xs, "activation")
        b.kernel("relu_fwd", [math.prod(xs), x, y], layer.name, "forward")
        return y
    if isinstance(layer, MaxPool2d):
        _, c, h, w = xs
        oh, ow = layer.out_shape((c, h, w))[1:]
        y = b.tensor(f"{layer.name}.out", [batch, c, oh, ow], "activation")
        am = b.saved[f"{layer.name}.argmax"] = b.tensor(f"{layer.name}.argmax",
                                                        [batch, c, oh, ow], "scratch", dtype="i32")
        b.kernel("maxpool_fwd", [batch, c, h, w, layer.kernel, layer.stride, oh, ow, x, y, am],
                 layer.name, "forward")
        return y
    W, bias = b.params[layer.name]
    if isinstance(layer, Linear):
        y = b.tensor(f"{layer.name}.out", [batch, layer.out_features], "activation")
        b.kernel("gemm_nt", [batch, layer.out_features, layer.in_features, 1.0, x, W, 0.0, y],
                 layer.name, "forward")
        b.kernel("bias_add", [batch, layer.out_features, 1, y, bias], layer.name, "forward")
        return y
    if isinstance(layer, Conv2d):
        _, c, h, w = xs
        oc, oh, ow = layer.out_shape((c, h, w))
        k, ckk, cols = layer.kernel, c * layer.kernel ** 2, batch * oh * ow
        key = conv_key(batch, c, h, w, oc, k, layer.stride, layer.pad)
        if b.conv_lowering.get(key) == "direct":
            y = b.tensor(f"{layer.name}.out", [batch, oc, oh, ow], "activation")
            b.kernel("conv2d_fwd", [batch, c, h, w, oc, k, k, layer.stride, layer.pad, oh, ow,
                                    x, W, y], layer.name, "forward")
            b.kernel("bias_add", [batch, oc, oh * ow, y, bias], layer.name, "forward")
            return y   # no col: the backward makes it
        col = b.tensor(f"{layer.name}.col", [ckk, cols], "scratch")
        yc = b.tensor(f"{layer.name}.out_cnhw", [oc, cols], "scratch")
        y = b.tensor(f"{layer.name}.out", [batch, oc, oh, ow], "activation")
        b.kernel("im2col", [batch, c, h, w, k, k, layer.stride, layer.pad, oh, ow, x, col],
                 layer.name, "forward")
        b.kernel("gemm_nn", [oc, cols, ckk, 1.0, W, col, 0.0, yc], layer.name, "forward")
        b.kernel("swap01", [oc, batch, oh * ow, yc, y], layer.name, "forward")
        b.kernel("bias_add", [batch, oc, oh * ow, y, bias], layer.name, "forward")
        b.saved[f"{layer.name}.col"] = col
        return y
    raise LowerError(f"layer {layer.name}: type {type(layer).__name__} has no lowering")


def _lower_backward(b: _Builder, layer, x: int, y: int, dy: int, need_dx: bool,
                    batch: int) -> int | None:
    """Emit the backward kernels of ``layer``; return the input-gradient id (or None)."""
    xs = b.tensors[x].shape
    name = layer.name

    def dx_tensor() -> int:
        return b.tensor(f"{b.tensors[x].name}.grad", xs, "grad")

    if isinstance(layer, Flatten):
        return dy
    if isinstance(layer, ReLU):
        if not need_dx:
            return None
        dx = dx_tensor()
        b.kernel("relu_bwd", [math.prod(xs), y, dy, dx], name, "backward")
        return dx
    if isinstance(layer, MaxPool2d):
        if not need_dx:
            return None
        _, c, h, w = xs
        oh, ow = b.tensors[y].shape[2:]
        am = b.saved[f"{name}.argmax"]
        dx = dx_tensor()
        b.kernel("maxpool_bwd", [batch, c, h, w, layer.kernel, layer.stride, oh, ow, dy, am, dx],
                 name, "backward")
        return dx
    W, bias = b.params[name]
    dW, db = b.grads[name]
    dx = None
    if isinstance(layer, Linear):
        o, i = layer.out_features, layer.in_features
        b.kernel("gemm_tn", [o, i, batch, 1.0, dy, x, 0.0, dW], name, "backward")
        if need_dx:
            dx = dx_tensor()
            b.kernel("gemm_nn", [batch, i, o, 1.0, dy, W, 0.0, dx], name, "backward")
        b.kernel("bias_grad", [batch, o, 1, dy, db], name, "backward")
        return dx
    if isinstance(layer, Conv2d):
        _, c, h, w = xs
        oc, oh, ow = b.tensors[y].shape[1:]
        k, ckk, cols = layer.kernel, c * layer.kernel ** 2, batch * oh * ow
        col = b.saved.get(f"{name}.col")
        if col is None:   # a direct forward: the weight gradient needs the columns
            col = b.tensor(f"{name}.col", [ckk, cols], "scratch")
            b.kernel("im2col", [batch, c, h, w, k, k, layer.stride, layer.pad, oh, ow, x, col],
                     name, "backward")
        dyc = b.tensor(f"{name}.out_cnhw.grad", [oc, cols], "scratch")
        b.kernel("swap01", [batch, oc, oh * ow, dy, dyc], name, "backward")
        b.kernel("gemm_nt", [oc, ckk, cols, 1.0, dyc, col, 0.0, dW], name, "backward")
        if need_dx:
            dcol = b.tensor(f"{name}.col.grad", [ckk, cols], "scratch")
            b.kernel("gemm_tn", [ckk, cols, oc, 1.0, W, dyc, 0.0, dcol], name, "backward")
            dx = dx_tensor()
            b.kernel("col2im", [batch, c, h, w, k, k, layer.stride, layer.pad, oh, ow, dcol, dx],
                     name, "backward")
        b.kernel("bias_grad", [batch, oc, oh * ow, dy, db], name, "backward")
        return dx
    raise LowerError(f"layer {name}: type {type(layer).__name__} has no lowering")


def _declare_params(b: _Builder, model: Model, plan_dir: str) -> None:
    """Parameters (bundle files), their gradients and SGD momentum buffers, per layer."""
    for layer, xs in zip(model.layers, model.shapes()):
        ids = [b.tensor(f"{layer.name}.{p}", s, "param", init={
            "kind": "file", "path": f"{plan_dir}/tensors/{layer.name}.{p}.f32"})
            for p, s in layer.param_shapes(xs).items()]
        if not ids:
            continue
        b.params[layer.name] = ids
        b.grads[layer.name] = [b.tensor(f"{b.tensors[i].name}.grad", b.tensors[i].shape,
                                        "grad") for i in ids]
        for w, g in zip(ids, b.grads[layer.name]):
            v = b.tensor(f"{b.tensors[w].name}.momentum", b.tensors[w].shape, "state")
            b.states.append((w, g, v))


def _compute_steps(b: _Builder, model: Model, spec: LowerSpec, plan_dir: str) -> tuple:
    """Forward, loss, backward and update kernels; returns (input, labels, loss) ids."""
    batch = spec.batch_size
    x = b.tensor("input", [batch, *model.input_shape], "input")
    labels = b.tensor("labels", [batch], "label", dtype="i32")
    _declare_params(b, model, plan_dir)
    acts = [x]
    for layer in model.layers:
        acts.append(_lower_forward(b, layer, acts[-1], batch))
    logits = acts[-1]
    dlogits = b.tensor(f"{b.tensors[logits].name}.grad", [batch, model.classes], "grad")
    row_loss = b.tensor("loss.rows", [batch], "scratch")
    loss = b.tensor("loss", [1], "loss")
    b.kernel("softmax_xent", [batch, model.classes, logits, labels, dlogits, row_loss],
             "loss", "loss")
    b.kernel("mean", [batch, row_loss, loss], "loss", "loss")
    # Backward stops at the first parameterized layer: nothing needs the input's gradient.
    first = next(i for i, layer in enumerate(model.layers) if layer.name in b.params)
    dy = dlogits
    for i in range(len(model.layers) - 1, first - 1, -1):
        dy = _lower_backward(b, model.layers[i], acts[i], acts[i + 1], dy, i > first, batch)
    for w, g, v in b.states:
        b.kernel("sgd_update", [b.tensors[w].numel, spec.lr, spec.momentum, spec.weight_decay,
                                w, g, v], b.tensors[w].name.rsplit(".", 1)[0], "update")
    return x, labels, loss


def _transfer(b: _Builder, spec: LowerSpec, tid: int, direction: str, layer: str) -> list[Step]:
    """One host->device ('write') or device->host ('read') move of a whole tensor."""
    nbytes = b.tensors[tid].size_bytes
    if spec.transfer == "copy":
        return [Step(op="h2d" if direction == "write" else "d2h", tensor=tid, bytes=nbytes,
                     layer=layer, phase="transfer")]
    return [Step(op="map", tensor=tid, access=direction, bytes=nbytes, layer=layer,
                 phase="transfer"),
            Step(op="unmap", tensor=tid, bytes=0, layer=layer, phase="transfer")]


def _place(b: _Builder, spec: LowerSpec, x: int, labels: int, loss: int) -> list[Step]:
    """Wrap the compute steps with loads and the placement's transfers; set homes."""
    loads = [Step(op="load", tensor=t, bytes=b.tensors[t].size_bytes, layer="input",
                  phase="load") for t in (x, labels)]
    compute = b.steps
    if spec.backend == "cpu":
        return loads + compute
    if spec.placement == "resident":
        for t in b.tensors:
            t.home = "host" if t.id in (x, labels, loss) else "device"
        ups = _transfer(b, spec, x, "write", "input") + _transfer(b, spec, labels, "write",
                                                                  "input")
        return loads + ups + compute + _transfer(b, spec, loss, "read", "loss")
    steps = list(loads)
    for s in compute:  # staged: the host owns everything; move each kernel's operands
        bound = bind_args(s.name, s.args)
        access = buffer_access(s.name, bound)
        for a, acc in access.items():
            if "r" in acc:
                steps += _transfer(b, spec, bound[a], "write", s.layer)
        steps.append(s)
        for a, acc in access.items():
            if "w" in acc:
                steps += _transfer(b, spec, bound[a], "read", s.layer)
    return steps


def _programs(plan_steps: list[Step], version: KernelVersion, kernels_root: Path) -> list[Program]:
    """Every resolved ``.cl`` file of the version (the build stage compiles the same set);
    a kernel the plan launches that no file mentions raises :class:`LowerError` early (a
    word match, since kernels may be defined through macros such as ``GEMM_KERNEL(gemm_nn)``).
    A version with a ``gemm_library`` gets the reserved program
    ``{"name": "gemm", "source": <library>, "options": ""}`` in place of any ``gemm.cl``
    (:mod:`phonetrain.plan`)."""
    needed = {s.name for s in plan_steps if s.op == "kernel"}
    programs, found = [], set()
    if version.gemm_library:   # GEMM routed to a library the runner loads
        programs.append(Program(name="gemm", source=version.gemm_library, options=""))
        found |= set(GEMM_KERNELS)
    for fname, path in resolve_sources(version.name, kernels_root).items():
        if version.gemm_library and fname == "gemm.cl":
            continue
        found |= kernels_mentioned(path, needed)
        programs.append(Program(name=Path(fname).stem, source=f"kernels/{version.name}/{fname}",
                                options=version.options))
    missing = needed - found
    if missing:
        raise LowerError(f"kernel version {version.name!r} ({kernels_root / version.name}) "
                         f"defines no kernel {sorted(missing)}; add them or inherit a "
                         "version that has them")
    return programs


def _dump_ids(tensors: list[Tensor], which: str) -> list[int]:
    roles = {"params": {"param"}, "grads": {"grad"}, "none": set(),
             "all": {"param", "grad", "state", "activation"}}[which]
    return [t.id for t in tensors if t.role in roles]


CHECKPOINT_ROLES = ("param", "state", "grad", "activation", "loss")


def checkpoint_tensors(tensors: list[Tensor]) -> list[int]:
    """What the runner keeps at a checkpoint: the state the next step reads (parameters and
    momentum buffers), what the update read (gradients), the step's activations and loss, and
    its integer scratch (max-pool argmax: the forward's decisions). Batches and float scratch
    (im2col columns, per-row losses) are left out: the per-step check recomputes them."""
    return [t.id for t in tensors
            if t.role in CHECKPOINT_ROLES or (t.role == "scratch" and t.dtype == "i32")]


def lower(spec: LowerSpec, model: Model | None = None, kernels_root: Path = KERNELS_ROOT,
          conv_lowering: dict[str, str] | None = None) -> Plan:
    """Lower one SGD training step of ``spec.model`` into a :class:`~phonetrain.plan.Plan`.

    Placements: ``cpu`` -- loads then the kernels, no transfers, every tensor home on the
    host. ``resident`` -- loads, the batch (input, labels) up, the kernels, the loss down;
    everything but input/labels/loss lives on the device. ``staged`` -- every tensor home on
    the host; before each kernel every buffer it reads is written to the device, after it
    every buffer it writes is read back (``copy``: h2d/d2h; ``map``: map + unmap).
    The batch and loss transfers and the staged operand transfers are the only transfers.

    Tensor files and data are referenced relative to the staging root:
    ``plans/<plan_id>/tensors/<name>.f32`` (parameters; written by ``write_plan_dir``) and
    ``data/<dataset dir>/b<batch>/{images.f32,labels.i32}`` (``phonetrain.data``). Raises
    :class:`LowerError` for a bad spec, an incompatible dataset, or a kernel version that
    lacks a kernel.

    ``conv_lowering`` (``{conv_key: "im2col" | "direct"}``, from a device's tuning.json through
    :func:`phonetrain.kernels.tuning.conv_lowerings`) lowers the listed conv shapes' forward
    with the direct ``conv2d_fwd`` kernel where it says ``direct`` (the backward then starts
    with an ``im2col``); every other conv uses im2col + GEMM + swap01.
    """
    spec.check()
    model = model or get_model(spec.model)
    dataset = spec.dataset or model.default_dataset
    try:
        datasets.check_compatible(dataset, model.input_shape, model.classes, model.name)
    except ValueError as e:
        raise LowerError(str(e)) from None
    version = load_version(spec.kernel, kernels_root)
    plan_id = spec.resolved_plan_id()
    b = _Builder(version, conv_lowering)
    x, labels, loss = _compute_steps(b, model, spec, plan_dir_rel(plan_id))
    steps = _place(b, spec, x, labels, loss)
    ddir = datasets.batch_dir(dataset, spec.batch_size, model.input_shape, model.classes)
    name = f"{model.name}/b{spec.batch_size}/{spec.backend}"
    if spec.backend == "opencl":
        name += f"-{spec.placement}-{spec.transfer}/{spec.kernel}"
    plan = Plan(name=name, backend=spec.backend, tensors=b.tensors, steps=steps,
                programs=_programs(steps, version, kernels_root) if spec.backend == "opencl"
                else [],
                batches=[Batch(tensor=x, path=f"{ddir}/images.f32", count=spec.num_batches),
                         Batch(tensor=labels, path=f"{ddir}/labels.i32",
                               count=spec.num_batches)],
                warmup=spec.warmup, iterations=spec.iterations, loss_tensor=loss,
                dumps=_dump_ids(b.tensors, spec.dumps),
                checkpoints={"iterations": list(spec.checkpoints),
                             "tensors": checkpoint_tensors(b.tensors)}
                if spec.checkpoints else None)
    plan.validate()
    return plan
