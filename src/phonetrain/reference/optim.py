"""Adam and AdamW in numpy: the ``adam_step`` and ``adam_update`` kernels of the ABI
(``src/kernels/README.md``, section "Optimizers").

The update rule is PyTorch's ``torch.optim.Adam`` / ``torch.optim.AdamW`` (single-tensor,
non-fused path; Kingma & Ba, "Adam: A Method for Stochastic Optimization", ICLR 2015;
Loshchilov & Hutter, "Decoupled Weight Decay Regularization", ICLR 2019). With ``t`` the step
count after ``adam_step`` incremented it and ``g = dW``::

    AdamW (decoupled = 1):  W = W * (1 - lr * weight_decay)
    Adam  (decoupled = 0):  g = g + weight_decay * W
    M = beta1 * M + (1 - beta1) * g
    V = beta2 * V + (1 - beta2) * g * g
    W = W - (lr / (1 - beta1**t)) * M / (sqrt(V) / sqrt(1 - beta2**t) + eps)

Same conventions as :mod:`.kernels`: in place on flat arrays of the caller's dtype (float32 or
float64); scalars are rounded to that dtype first. The bias corrections ``1 - beta**t`` are
computed as ``-expm1(t * log(beta))`` (:func:`bias_correction`). Registered in
:data:`phonetrain.reference.kernels.KERNELS`.
"""

from __future__ import annotations

import numpy as np


def bias_correction(beta, t):
    """``1 - beta**t`` computed as ``-expm1(t * log(beta))`` in the dtype of ``beta``: the
    same value without the cancellation of ``1 - beta**t`` for ``beta`` near 1 (the kernels
    use this form too)."""
    return -np.expm1(t * np.log(beta))


def _adam_step(d) -> None:
    d["step"][0] += 1


def _adam_update(d) -> None:
    n = int(d["n"])
    W, dW, M, V = d["W"][:n], d["dW"][:n], d["M"][:n], d["V"][:n]
    t = W.dtype.type
    lr, b1, b2, eps, wd = (t(d[k]) for k in ("lr", "beta1", "beta2", "eps", "weight_decay"))
    step = d["step"][0].astype(W.dtype)
    if step < 1:
        raise ValueError(f"step count is {float(step)}; adam_step must run first (>= 1)")
    g = dW
    if int(d["decoupled"]):
        W *= t(1) - lr * wd
    else:
        g = dW + wd * W
    M[...] = b1 * M + (t(1) - b1) * g
    V[...] = b2 * V + (t(1) - b2) * g * g
    step_size = lr / bias_correction(b1, step)
    bc2_sqrt = np.sqrt(bias_correction(b2, step))
    W -= step_size * M / (np.sqrt(V) / bc2_sqrt + eps)


OPTIM_KERNELS = {"adam_step": _adam_step, "adam_update": _adam_update}
