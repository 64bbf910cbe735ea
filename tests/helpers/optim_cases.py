"""Kernel-ABI test cases of the optimizer kernels (``adam_step``, ``adam_update``;
src/kernels/README.md, section "Optimizers") and their numpy oracle, written from the README's
formulas in float64 (``1 - beta**t`` as written there; the kernels compute it as
``-expm1(t * log(beta))``). Joined to :mod:`helpers.kernel_cases` as group ``optimizer``."""

from __future__ import annotations

import numpy as np

from helpers.kernel_cases import Case, _rand


def _adam_step(step):
    step[0] += 1


def _adam_update(n, lr, beta1, beta2, eps, weight_decay, decoupled, step, W, dW, M, V):
    t = float(step[0])
    w, g = W[:n].astype(np.float64), dW[:n].astype(np.float64)
    if decoupled:
        w = w * (1 - lr * weight_decay)
    else:
        g = g + weight_decay * w
    m = beta1 * M[:n].astype(np.float64) + (1 - beta1) * g
    v = beta2 * V[:n].astype(np.float64) + (1 - beta2) * g * g
    M[:n], V[:n] = m, v
    W[:n] = w - lr / (1 - beta1 ** t) * m / (np.sqrt(v) / np.sqrt(1 - beta2 ** t) + eps)


OPTIM_ORACLE = {"adam_step": _adam_step, "adam_update": _adam_update}


def optim_cases(rng: np.random.Generator) -> list[Case]:
    """``adam_step`` from a few counts (exact); ``adam_update`` for Adam and AdamW, with and
    without weight decay, at steps 1, 2 and 37 (bias corrections far from and near 1), on
    sizes 1, 17, 784 and one past the CPU backend's one-thread limit (16384)."""
    out = [Case("adam_step", ["step"], {"step": np.array([s], np.float32)}, ("step",),
                exact=True, label=f"adam_step {s}") for s in (0, 4, 1e6)]
    for n, t, decoupled, wd in ((1, 1, 1, 0.01), (17, 2, 0, 0.0), (784, 37, 1, 0.1),
                                (16385, 1, 0, 1e-4), (784, 2, 0, 0.01)):
        arrays = {"step": np.array([t], np.float32), "W": _rand(rng, n), "dW": _rand(rng, n),
                  "M": _rand(rng, n, low=-0.1, high=0.1),
                  "V": _rand(rng, n, low=0.0, high=0.01)}
        if t == 1:   # the first step starts from zero moments, as training does
            arrays["M"][:] = 0
            arrays["V"][:] = 0
        out.append(Case("adam_update", [n, 1e-3, 0.9, 0.999, 1e-8, wd, decoupled, "step", "W",
                                        "dW", "M", "V"], arrays, ("W", "M", "V"),
                        label=f"adam_update n={n} t={t} decoupled={decoupled} wd={wd}",
                        atol=1e-6, rtol=1e-5))
    return out
