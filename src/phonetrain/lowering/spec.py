"""What to lower: one model x batch x backend placement x kernel version x dataset."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from phonetrain.errors import PhonetrainError
from phonetrain.plan import DEFAULT_ITERATIONS, DEFAULT_WARMUP

PLACEMENTS = ("resident", "staged", "pipelined")
# Backends that run kernels on a device (placement and transfer apply); the Vulkan backend
# has no second queue yet, so no pipelined placement.
DEVICE_BACKENDS = {"opencl": PLACEMENTS, "vulkan": ("resident", "staged")}
OPTIMIZERS = ("sgd", "adam", "adamw")
# Fields that only an Adam-family optimizer reads: an SGD spec leaves them out of its plan id.
ADAM_FIELDS = ("optimizer", "betas", "eps")
TRANSFERS = ("copy", "map")
DUMPS = ("params", "grads", "all", "none")


class LowerError(PhonetrainError, ValueError):
    """A spec that cannot be lowered; the message names the field and what to change."""


@dataclass(frozen=True)
class LowerSpec:
    """Settings of one lowered training step.

    ``backend`` ``cpu`` (runner's C kernels, no transfers), ``opencl`` or ``vulkan`` (compute
    shaders; no ``pipelined`` placement) with ``placement``
    (``resident``: tensors live on the device; ``staged``: the host owns every tensor;
    ``pipelined``: staged, with the transfers on a second queue overlapping the kernels) and
    ``transfer`` (``copy``: read/write buffer; ``map``: map/unmap of host-allocated buffers).
    ``kernel`` names a folder under ``src/kernels``. ``num_batches`` consecutive batches of
    ``dataset`` are cycled through. ``optimizer``: ``sgd`` (PyTorch's SGD: ``lr``,
    ``momentum``, ``weight_decay``), ``adam`` or ``adamw`` (PyTorch's Adam/AdamW: ``lr``,
    ``betas``, ``eps``, ``weight_decay``; ``momentum`` must be 0; :mod:`.optim`).
    ``seed`` seeds the parameter init (and names nothing else). ``dumps`` selects the tensors
    written at the end: ``params`` (final weights and biases), ``grads`` (last gradients),
    ``all`` (params, grads, momentum buffers, activations) or ``none``. ``checkpoints``:
    iterations (0-based, warm-up included; negative from the end) after which the runner
    keeps the step's state for the per-step verification (:mod:`phonetrain.plan`); empty:
    none. ``reuse_buffers``: tensors whose lifetimes do not overlap share one buffer
    (:mod:`.reuse`); the checkpoints then keep only what is never shared.
    ``splitk_groups`` (fused lowering only): the number of work-groups a convolution update
    with long, few weight-gradient sums is split to reach
    (:func:`phonetrain.lowering.fused.conv_sgd_splits`: ``conv_wgrad_partial`` +
    ``conv_sgd_finish``, ``gconv_wgrad_partial`` + ``gconv_sgd_finish`` in place of one
    ``conv_sgd``/``gconv_sgd``). It pays where idle compute units outweigh the extra launch
    and partial sums: 1024 suits an H200-class GPU (132 SMs x 8 work-groups of 256); on CPUs
    (PoCL, the CPU backend) and phone GPUs, with no idle compute units to fill, the extra
    work-groups only cost (PoCL: LeNet-5's conv1 update 17.6 -> 24.6 ms), so 0 (the default)
    never splits. ``plan_id`` defaults to a readable name plus a hash of every field.
    """

    model: str
    batch_size: int = 32
    backend: str = "cpu"
    placement: str | None = None
    transfer: str | None = None
    kernel: str = "baseline"
    dataset: str | None = None
    num_batches: int = 8
    warmup: int = DEFAULT_WARMUP
    iterations: int = DEFAULT_ITERATIONS
    seed: int = 0
    lr: float = 0.05
    momentum: float = 0.0
    weight_decay: float = 0.0
    optimizer: str = "sgd"
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    plan_id: str | None = None
    dumps: str = "params"
    checkpoints: tuple[int, ...] = (0, 1, -2, -1)
    reuse_buffers: bool = False
    splitk_groups: int = 0

    def check(self) -> None:
        """Raise :class:`LowerError` naming the first bad field."""
        if self.backend != "cpu" and self.backend not in DEVICE_BACKENDS:
            raise LowerError(f"backend={self.backend!r}: use 'cpu', "
                             f"{' or '.join(repr(b) for b in DEVICE_BACKENDS)}")
        if self.backend in DEVICE_BACKENDS:
            placements = DEVICE_BACKENDS[self.backend]
            if self.placement not in placements:
                raise LowerError(f"placement={self.placement!r}: the {self.backend} backend "
                                 f"needs one of {placements}")
            if self.transfer not in TRANSFERS:
                raise LowerError(f"transfer={self.transfer!r}: the {self.backend} backend "
                                 f"needs one of {TRANSFERS}")
            if self.placement == "pipelined" and self.transfer != "copy":
                raise LowerError(f"transfer={self.transfer!r}: placement 'pipelined' overlaps "
                                 "non-blocking read/write-buffer copies; use transfer 'copy'")
        elif (self.placement, self.transfer) != (None, None):
            raise LowerError("placement/transfer apply to the opencl and vulkan backends only; "
                             "leave them unset (null) for backend=cpu")
        for key in ("batch_size", "num_batches", "iterations"):
            if int(getattr(self, key)) < 1:
                raise LowerError(f"{key}={getattr(self, key)}: must be >= 1")
        if self.warmup < 0:
            raise LowerError("warmup must be >= 0")
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in self.checkpoints):
            raise LowerError(f"checkpoints={self.checkpoints!r}: iteration numbers (ints; "
                             "negative counts from the end)")
        if self.dumps not in DUMPS:
            raise LowerError(f"dumps={self.dumps!r}: use one of {DUMPS}")
        if (not isinstance(self.splitk_groups, int) or isinstance(self.splitk_groups, bool)
                or self.splitk_groups < 0):
            raise LowerError(f"splitk_groups={self.splitk_groups!r}: an int >= 0, the "
                             "work-groups a fused convolution update is split to reach "
                             "(e.g. 1024 on an H200-class GPU); 0 never splits")
        self._check_optimizer()

    def _check_optimizer(self) -> None:
        """The optimizer's settings, as PyTorch's constructors check them (betas in [0, 1));
        ``eps`` > 0 (at 0 a parameter whose gradients are all 0 gets 0/0)."""
        if self.optimizer not in OPTIMIZERS:
            raise LowerError(f"optimizer={self.optimizer!r}: use one of {OPTIMIZERS}")
        if self.optimizer == "sgd":
            return
        if self.momentum != 0:
            raise LowerError(f"momentum={self.momentum}: {self.optimizer} has no momentum "
                             "(betas[0] is its first-moment decay); set it to 0")
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise LowerError(f"betas={self.betas!r}: two decay rates in [0, 1), e.g. "
                             "(0.9, 0.999)")
        if not self.eps > 0:
            raise LowerError(f"eps={self.eps}: must be > 0, e.g. 1e-8")

    def resolved_plan_id(self) -> str:
        """``plan_id``, else ``<model>-b<batch>-<backend>[-<placement>-<transfer>-<kernel>]``
        plus ``-<first 8 hex of sha256 over every other field>`` (:data:`ADAM_FIELDS` only
        when ``optimizer`` is not ``sgd``)."""
        if self.plan_id:
            return self.plan_id
        parts = [self.model, f"b{self.batch_size}", self.backend]
        if self.backend in DEVICE_BACKENDS:
            parts += [str(self.placement), str(self.transfer), self.kernel]
        d = asdict(self)
        d.pop("plan_id")
        if not self.reuse_buffers:   # plan ids of specs without reuse stay what they were
            d.pop("reuse_buffers")
        if not self.splitk_groups:   # plan ids of specs without split K stay what they were
            d.pop("splitk_groups")
        if self.optimizer == "sgd":   # plan ids of SGD specs stay what they were before Adam
            for k in ADAM_FIELDS:
                d.pop(k)
        digest = hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:8]
        return "-".join(parts + [digest])
