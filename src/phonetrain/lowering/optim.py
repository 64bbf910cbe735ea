"""The update step of a lowered training step: PyTorch's SGD, Adam or AdamW.

SGD (``optimizer: sgd``): one ``sgd_update`` per parameter with its momentum buffer
``<param>.momentum`` (``state``, zeros).

Adam and AdamW (``adam``, ``adamw``; Kingma & Ba, ICLR 2015; Loshchilov & Hutter,
"Decoupled Weight Decay Regularization", ICLR 2019; PyTorch's ``torch.optim.Adam`` /
``torch.optim.AdamW``): per parameter the first and second moment estimates
``<param>.exp_avg`` and ``<param>.exp_avg_sq`` (PyTorch's state names; ``state``, float32,
the parameter's shape, zeros) and one step count for the whole model, ``optimizer.step``
(``state``, float32 ``[1]``, zeros: exact up to 2**24 steps). The update phase first runs
``adam_step`` (``step += 1`` on the device: the bias correction needs no value from the host),
then one ``adam_update`` per parameter (``decoupled`` 1 for AdamW). Every one of these tensors
is ``state``, so the runner checkpoints them and the per-step verification checks them like
the momentum buffers.
"""

from __future__ import annotations

from .spec import LowerError, LowerSpec

STEP_TENSOR = "optimizer.step"
STEP_LAYER = "optimizer"     # the layer tag of the adam_step launch


def declare_state(b, spec: LowerSpec, params: list[int], grads: list[int] | None) -> list[int]:
    """Declare the optimizer state of one layer's parameters ``params`` (gradient ids
    ``grads``, None for the fused lowering); record ``(param, grad, *state)`` in ``b.states``
    when there are gradients. Returns the state ids of the first moment (the SGD momentum
    buffers, or Adam's ``exp_avg``), in ``params`` order."""
    first = []
    for k, w in enumerate(params):
        t = b.tensors[w]
        names = ("momentum",) if spec.optimizer == "sgd" else ("exp_avg", "exp_avg_sq")
        ids = [b.tensor(f"{t.name}.{s}", t.shape, "state") for s in names]
        first.append(ids[0])
        if grads is not None:
            b.states.append((w, grads[k], *ids))
    return first


def lower_update(b, spec: LowerSpec) -> None:
    """Emit the update phase for every ``(param, grad, *state)`` of ``b.states``."""
    if spec.optimizer == "sgd":
        for w, g, v in b.states:
            b.kernel("sgd_update", [b.tensors[w].numel, spec.lr, spec.momentum,
                                    spec.weight_decay, w, g, v], _layer(b, w), "update")
        return
    step = b.tensor(STEP_TENSOR, [1], "state")
    b.kernel("adam_step", [step], STEP_LAYER, "update")
    beta1, beta2 = spec.betas
    decoupled = 1 if spec.optimizer == "adamw" else 0
    for w, g, m, v in b.states:
        b.kernel("adam_update", [b.tensors[w].numel, spec.lr, beta1, beta2, spec.eps,
                                 spec.weight_decay, decoupled, step, w, g, m, v],
                 _layer(b, w), "update")


def refuse_fused(spec: LowerSpec, version: str) -> None:
    """The fused lowering updates with SGD inside its gradient kernels: raise
    :class:`LowerError` for any other optimizer."""
    if spec.optimizer != "sgd":
        raise LowerError(f"optimizer={spec.optimizer!r}: kernel version {version!r} lowers "
                         "the step with fused SGD kernels (lowering: fused_step), which take "
                         "optimizer 'sgd' only; use a per_layer version (baseline, tiled, "
                         "regblock, image, clblast) for adam/adamw")


def _layer(b, w: int) -> str:
    return b.tensors[w].name.rsplit(".", 1)[0]
