"""Lowering of one training step: layers -> kernel steps -> placement-specific plan.

Tensor names: ``input``, ``labels``; ``<layer>.weight``/``.bias`` (params), each with
``.grad`` and its optimizer state (``.momentum`` for SGD, ``.exp_avg``/``.exp_avg_sq`` and
one ``optimizer.step`` for Adam/AdamW: :mod:`.optim`); ``<layer>.out`` (activations) and ``<tensor>.grad`` for the
gradient of any activation; conv scratch ``<layer>.col``, ``<layer>.out_cnhw`` (+ ``.grad``),
pool scratch ``<layer>.argmax`` (int); ``loss.rows`` and ``loss``. Every step is tagged with
its layer (``input``/``loss`` for batch and loss traffic) and phase. Each layer type's kernel
sequence is the one ``src/kernels/README.md`` gives (Linear: gemm_nt + bias_add; Conv2d:
im2col + gemm_nn + swap01 + bias_add, or conv2d_fwd + bias_add where the device's tuning
chose the direct convolution; backward mirrors it; the mobile operators: its section
"Mobile CNN operators"). A kernel version whose
``version.yaml`` sets ``lowering: fused_step`` gets the fused sequence of
:mod:`phonetrain.lowering.fused` instead (:mod:`phonetrain.lowering.fused_bn` for a model
with batch normalization).

Mobile layers: batch norm's running statistics ``<layer>.running_mean``/``.running_var`` are
``state`` tensors (read from bundle files like parameters, updated by ``batchnorm_stats``,
no SGD), its per-step ``<layer>.mean``/``.invstd`` scratch. A :class:`Residual` lowers its body
in sequence then ``add(body out, input) -> <layer>.out``; backward runs the body's backward
(its input gradient named ``<layer>.body.grad``) and sums the two gradients of the block's
input -- through the body and through the skip, which passes ``dY`` unchanged -- with one
``add`` into ``<input>.grad``. A tensor used twice thus gets one gradient buffer per use and
one explicit sum; no kernel accumulates into a buffer another wrote.
"""

from __future__ import annotations

import math
from pathlib import Path

from .. import data as datasets
from ..kernels.spirv import resolve_shaders, spec_options
from ..kernels.tuning import conv_key
from ..kernels import (GEMM_KERNELS, KERNEL_ARGS, KERNELS_ROOT, KernelVersion, bind_args,
                       buffer_access, geometry, kernel_flops, kernels_mentioned, load_version,
                       mark_image_args, resolve_sources)
from ..models import (BatchNorm2d, Conv2d, DepthwiseConv2d, Flatten, GlobalAvgPool2d, Linear,
                      MaxPool2d, Model, ReLU, ReLU6, Residual, get_model, walk)
from ..layout import device_spirv, plan_dir_rel
from ..plan import Batch, Plan, Program, Step, Tensor
from .pipeline import add_waits, schedule
from .fused import lower_fused
from .fused_bn import lower_fused_bn, uses_batchnorm
from .optim import declare_state, lower_update, refuse_fused
from .reuse import SHARABLE_ROLES, apply as apply_buffers, assign as assign_buffers
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
        self.states: list[tuple[int, ...]] = []  # (param, grad, *optimizer state) ids
        self.momenta: dict[str, list[int]] = {}  # layer -> [weight, bias] momentum ids
        self.saved: dict[str, int] = {}          # forward tensors backward needs (col, argmax)
        self.bn_state: dict[str, list[int]] = {}  # batch norm layer -> [running mean, var]
        self.body_acts: dict[str, list[int]] = {}  # residual layer -> its body's activations

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
    mobile = _lower_mobile_forward(b, layer, x, batch)
    if mobile is not None:
        return mobile
    W, *rest = b.params[layer.name]
    bias = rest[0] if rest else None
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
        if bias is not None:
            b.kernel("bias_add", [batch, oc, oh * ow, y, bias], layer.name, "forward")
        b.saved[f"{layer.name}.col"] = col
        return y
    raise LowerError(f"layer {layer.name}: type {type(layer).__name__} has no lowering")


def _input_grad(b: _Builder, need_dx: bool, dx_tensor, kernel: str, args: list,
                name: str) -> int | None:
    """The input gradient of layer ``name`` computed by one backward kernel whose last
    argument it is (``kernel(*args, dx)``): declared by ``dx_tensor()`` and emitted only when
    ``need_dx``, else None."""
    if not need_dx:
        return None
    dx = dx_tensor()
    b.kernel(kernel, [*args, dx], name, "backward")
    return dx


def _lower_backward(b: _Builder, layer, x: int, y: int, dy: int, need_dx: bool,
                    batch: int, dx_name: str | None = None) -> int | None:
    """Emit the backward kernels of ``layer``; return the input-gradient id (or None).
    ``dx_name``: the input gradient's tensor name (default ``<input>.grad``)."""
    xs = b.tensors[x].shape
    name = layer.name

    def dx_tensor() -> int:
        return b.tensor(dx_name or f"{b.tensors[x].name}.grad", xs, "grad")

    if isinstance(layer, (Residual, BatchNorm2d, DepthwiseConv2d, ReLU6, GlobalAvgPool2d)):
        return _lower_mobile_backward(b, layer, x, y, dy, need_dx, batch, dx_tensor)

    if isinstance(layer, Flatten):
        return dy
    if isinstance(layer, ReLU):
        return _input_grad(b, need_dx, dx_tensor, "relu_bwd", [math.prod(xs), y, dy], name)
    if isinstance(layer, MaxPool2d):
        _, c, h, w = xs
        oh, ow = b.tensors[y].shape[2:]
        am = b.saved[f"{name}.argmax"]
        return _input_grad(b, need_dx, dx_tensor, "maxpool_bwd",
                           [batch, c, h, w, layer.kernel, layer.stride, oh, ow, dy, am], name)
    W = b.params[name][0]
    dW, *rest = b.grads[name]
    db = rest[0] if rest else None
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
        if db is not None:
            b.kernel("bias_grad", [batch, oc, oh * ow, dy, db], name, "backward")
        return dx
    raise LowerError(f"layer {name}: type {type(layer).__name__} has no lowering")


def _lower_mobile_forward(b: _Builder, layer, x: int, batch: int) -> int | None:
    """Forward kernels of the mobile layers (None for any other layer type)."""
    xs = b.tensors[x].shape
    name = layer.name
    if isinstance(layer, ReLU6):
        y = b.tensor(f"{name}.out", xs, "activation")
        b.kernel("relu6_fwd", [math.prod(xs), x, y], name, "forward")
        return y
    if isinstance(layer, GlobalAvgPool2d):
        _, c, h, w = xs
        y = b.tensor(f"{name}.out", [batch, c], "activation")
        b.kernel("gap_fwd", [batch, c, h * w, x, y], name, "forward")
        return y
    if isinstance(layer, DepthwiseConv2d):
        _, c, h, w = xs
        _, oh, ow = layer.out_shape((c, h, w))
        y = b.tensor(f"{name}.out", [batch, c, oh, ow], "activation")
        b.kernel("dwconv3x3_fwd", [batch, c, h, w, layer.stride, layer.pad, oh, ow, x,
                                   b.params[name][0], y], name, "forward")
        return y
    if isinstance(layer, BatchNorm2d):
        _, c, h, w = xs
        gamma, beta = b.params[name]
        rmean, rvar = b.bn_state[name]
        mean = b.saved[f"{name}.mean"] = b.tensor(f"{name}.mean", [c], "scratch")
        invstd = b.saved[f"{name}.invstd"] = b.tensor(f"{name}.invstd", [c], "scratch")
        y = b.tensor(f"{name}.out", xs, "activation")
        b.kernel("batchnorm_stats", [batch, c, h * w, layer.eps, layer.momentum, x, mean, invstd,
                                     rmean, rvar], name, "forward")
        b.kernel("batchnorm_apply", [batch, c, h * w, x, mean, invstd, gamma, beta, y], name,
                 "forward")
        return y
    if isinstance(layer, Residual):
        acts = [x]
        for inner in layer.body:
            acts.append(_lower_forward(b, inner, acts[-1], batch))
        b.body_acts[name] = acts
        y = b.tensor(f"{name}.out", xs, "activation")
        b.kernel("add", [math.prod(xs), acts[-1], x, y], name, "forward")
        return y
    return None


def _lower_mobile_backward(b: _Builder, layer, x: int, y: int, dy: int, need_dx: bool,
                           batch: int, dx_tensor) -> int | None:
    """Backward kernels of the mobile layers; ``dx_tensor()`` declares the input gradient."""
    xs = b.tensors[x].shape
    name = layer.name
    if isinstance(layer, Residual):
        acts = b.body_acts[name]
        d = dy
        for i in range(len(layer.body) - 1, -1, -1):
            d = _lower_backward(b, layer.body[i], acts[i], acts[i + 1], d,
                                need_dx if i == 0 else True, batch,
                                dx_name=f"{name}.body.grad" if i == 0 else None)
        # the input's two uses: the body (d) and the skip (dy)
        return _input_grad(b, need_dx, dx_tensor, "add", [math.prod(xs), d, dy], name)
    if isinstance(layer, ReLU6):
        return _input_grad(b, need_dx, dx_tensor, "relu6_bwd", [math.prod(xs), y, dy], name)
    _, c, h, w = xs
    if isinstance(layer, GlobalAvgPool2d):
        return _input_grad(b, need_dx, dx_tensor, "gap_bwd", [batch, c, h * w, dy], name)
    if isinstance(layer, DepthwiseConv2d):
        oh, ow = b.tensors[y].shape[2:]
        dims = [batch, c, h, w, layer.stride, layer.pad, oh, ow]
        b.kernel("dwconv3x3_bwd_weight", dims + [x, dy, b.grads[name][0]], name, "backward")
        return _input_grad(b, need_dx, dx_tensor, "dwconv3x3_bwd_data",
                           dims + [dy, b.params[name][0]], name)
    # BatchNorm2d: the batch statistics depend on X, so dX has the two correction terms
    gamma = b.params[name][0]
    dgamma, dbeta = b.grads[name]
    mean, invstd = b.saved[f"{name}.mean"], b.saved[f"{name}.invstd"]
    b.kernel("batchnorm_bwd_reduce", [batch, c, h * w, x, dy, mean, invstd, dgamma, dbeta],
             name, "backward")
    return _input_grad(b, need_dx, dx_tensor, "batchnorm_bwd_data",
                       [batch, c, h * w, x, dy, mean, invstd, gamma, dgamma, dbeta], name)


def _has_params(b: _Builder, layer) -> bool:
    if isinstance(layer, Residual):
        return any(_has_params(b, inner) for inner in layer.body)
    return layer.name in b.params


def _declare_params(b: _Builder, model: Model, plan_dir: str, spec: LowerSpec,
                    grads: bool = True) -> None:
    """Parameters (bundle files), their gradients (unless ``grads`` is False: the fused
    lowering updates the weights in the gradient kernel) and the optimizer's state (SGD
    momentum buffers, or Adam's moments: :mod:`.optim`), per layer (the layers inside
    residual blocks included); batch norm's running statistics as state."""
    for layer, xs in walk(model.layers, tuple(model.input_shape)):
        for sname, shape in getattr(layer, "state_shapes", dict)().items():
            b.bn_state.setdefault(layer.name, []).append(b.tensor(
                f"{layer.name}.{sname}", shape, "state",
                init={"kind": "file", "path": f"{plan_dir}/tensors/{layer.name}.{sname}.f32"}))
        ids = [b.tensor(f"{layer.name}.{p}", s, "param", init={
            "kind": "file", "path": f"{plan_dir}/tensors/{layer.name}.{p}.f32"})
            for p, s in layer.param_shapes(xs).items()]
        if not ids:
            continue
        b.params[layer.name] = ids
        if grads:
            b.grads[layer.name] = [b.tensor(f"{b.tensors[i].name}.grad", b.tensors[i].shape,
                                            "grad") for i in ids]
        b.momenta[layer.name] = declare_state(b, spec, ids,
                                              b.grads[layer.name] if grads else None)


def _compute_steps(b: _Builder, model: Model, spec: LowerSpec, plan_dir: str) -> tuple:
    """Forward, loss, backward and update kernels; returns (input, labels, loss) ids."""
    batch = spec.batch_size
    x = b.tensor("input", [batch, *model.input_shape], "input")
    labels = b.tensor("labels", [batch], "label", dtype="i32")
    if b.version.lowering == "fused_step":   # version.yaml's lowering key, never the version name
        refuse_fused(spec, b.version.name)
        _declare_params(b, model, plan_dir, spec, grads=False)
        fused = lower_fused_bn if uses_batchnorm(model) else lower_fused
        return x, labels, fused(b, model, spec, x, labels)
    _declare_params(b, model, plan_dir, spec)
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
    first = next(i for i, layer in enumerate(model.layers) if _has_params(b, layer))
    dy = dlogits
    for i in range(len(model.layers) - 1, first - 1, -1):
        dy = _lower_backward(b, model.layers[i], acts[i], acts[i + 1], dy, i > first, batch)
    lower_update(b, spec)
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
    def access_of(s: Step) -> tuple[dict, dict]:
        bound = bind_args(s.name, s.args)
        return bound, buffer_access(s.name, bound)

    per_kernel = []   # staged: the host owns everything; move each kernel's operands
    for s in compute:
        bound, access = access_of(s)
        ups = [u for a, acc in access.items() if "r" in acc
               for u in _transfer(b, spec, bound[a], "write", s.layer)]
        downs = [d for a, acc in access.items() if "w" in acc
                 for d in _transfer(b, spec, bound[a], "read", s.layer)]
        per_kernel.append((ups, s, downs))
    if spec.placement == "pipelined":
        return schedule(loads, per_kernel, access_of)
    return loads + [x for ups, s, downs in per_kernel for x in (*ups, s, *downs)]


def _shader_programs(plan_steps: list[Step], version: KernelVersion,
                     kernels_root: Path) -> list[Program]:
    """The Vulkan plan's programs: one per kernel the plan launches, named after it, its
    SPIR-V at ``spirv/<version>/<kernel>.spv`` (:mod:`phonetrain.kernels.spirv`), its options
    the version's specialization constants (:func:`phonetrain.kernels.spirv.spec_options`). A
    kernel without a shader in the version's ``vk/`` chain raises :class:`LowerError`."""
    needed = sorted({s.name for s in plan_steps if s.op == "kernel"})
    shaders = resolve_shaders(version.name, kernels_root)
    missing = [k for k in needed if k not in shaders]
    if missing:
        raise LowerError(f"kernel version {version.name!r} has no Vulkan shader for {missing} "
                         f"(expected {kernels_root / version.name / 'vk'}/<kernel>.comp or an "
                         "inherited one); write them or use backend opencl/cpu")
    return [Program(name=k, source=f"{device_spirv(version.name)}/{k}.spv",
                    options=spec_options(version)) for k in needed]


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
    """Lower one training step (SGD, Adam or AdamW: ``spec.optimizer``) of ``spec.model`` into a :class:`~phonetrain.plan.Plan`.

    Placements: ``cpu`` -- loads then the kernels, no transfers, every tensor home on the
    host. ``resident`` -- loads, the batch (input, labels) up, the kernels, the loss down;
    everything but input/labels/loss lives on the device. ``staged`` -- every tensor home on
    the host; before each kernel every buffer it reads is written to the device, after it
    every buffer it writes is read back (``copy``: h2d/d2h; ``map``: map + unmap).
    ``pipelined`` -- staged's transfers (``copy`` only) on a second queue, reordered so the
    next kernel's uploads overlap the current kernel, with wait lists (plan version 2;
    :mod:`phonetrain.lowering.pipeline`).
    The batch and loss transfers and the staged operand transfers are the only transfers.

    Tensor files and data are referenced relative to the staging root:
    ``plans/<plan_id>/tensors/<name>.f32`` (parameters; written by ``write_plan_dir``) and
    ``data/<dataset dir>/b<batch>/{images.f32,labels.i32}`` (``phonetrain.data``). Raises
    :class:`LowerError` for a bad spec, a model without parameters, an incompatible
    dataset, or a kernel version that lacks a kernel.

    ``conv_lowering`` (``{conv_key: "im2col" | "direct"}``, from a device's tuning.json through
    :func:`phonetrain.kernels.tuning.conv_lowerings`) lowers the listed conv shapes' forward
    with the direct ``conv2d_fwd`` kernel where it says ``direct`` (the backward then starts
    with an ``im2col``); every other conv uses im2col + GEMM + swap01.
    """
    spec.check()
    model = model or get_model(spec.model)
    if not model.param_shapes():  # nothing to train: no gradient, no update, no step
        kinds = [type(layer).__name__ for layer in model.layers]
        raise LowerError(f"model {model.name} has no layer with parameters (layers: "
                         f"{kinds or 'none'}); a training step needs at least one Linear, "
                         "Conv2d, DepthwiseConv2d or BatchNorm2d: add one to the model "
                         "(src/phonetrain/models/zoo.py)")
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
    if spec.backend != "cpu":
        name += f"-{spec.placement}-{spec.transfer}/{spec.kernel}"
    if spec.reuse_buffers:
        name += "/reuse"
    if spec.splitk_groups:
        name += f"/splitk{spec.splitk_groups}"
    plan = Plan(name=name, backend=spec.backend, tensors=b.tensors, steps=steps,
                programs=_programs(steps, version, kernels_root) if spec.backend == "opencl"
                else _shader_programs(steps, version, kernels_root)
                if spec.backend == "vulkan" else [],
                batches=[Batch(tensor=x, path=f"{ddir}/images.f32", count=spec.num_batches),
                         Batch(tensor=labels, path=f"{ddir}/labels.i32",
                               count=spec.num_batches)],
                warmup=spec.warmup, iterations=spec.iterations, loss_tensor=loss,
                dumps=_dump_ids(b.tensors, spec.dumps),
                checkpoints={"iterations": list(spec.checkpoints),
                             "tensors": checkpoint_tensors(b.tensors)}
                if spec.checkpoints else None)
    if spec.reuse_buffers:
        _reuse(plan, spec)
    plan.validate()
    return plan


def _reuse(plan: Plan, spec: LowerSpec) -> None:
    """Share buffers between tensors with disjoint lifetimes (:mod:`.reuse`). What is read
    after the step -- dumps, and the checkpoints' state (every checkpoint tensor of role
    param/state/loss, parameter gradients, integer scratch) -- is never shared; shared tensors
    leave the checkpoint list. The pipelined placement's wait lists are recomputed over the
    buffers, so a command on one queue waits for the other queue's use of the same buffer."""
    keep = set(plan.dumps)
    ckpt = set((plan.checkpoints or {}).get("tensors", []))
    pgrads = {f"{t.name}.grad" for t in plan.tensors if t.role == "param"}
    keep |= {t for t in ckpt if plan.tensors[t].role not in SHARABLE_ROLES
             or plan.tensors[t].name in pgrads or plan.tensors[t].dtype == "i32"}
    a = assign_buffers(plan.tensors, plan.steps, keep)
    plan.buffers = apply_buffers(plan.tensors, a)
    if plan.checkpoints:
        plan.checkpoints["tensors"] = [t for t in plan.checkpoints["tensors"]
                                       if t not in a.buffer_of]
    if spec.backend == "opencl" and spec.placement == "pipelined":
        key = {tid: f"buf{i}" for tid, i in a.buffer_of.items()}

        def access_of(s: Step) -> tuple[dict, dict]:
            bound = bind_args(s.name, s.args)
            return bound, buffer_access(s.name, bound)

        add_waits(plan.steps, access_of, lambda t: key.get(t, t))
