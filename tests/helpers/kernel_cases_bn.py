"""Test cases and float64 oracle of the fused batch-norm kernels (src/kernels/README.md,
"Fused batch-norm kernels"): grouped convolutions (plain, depthwise, and groups between)
with batch normalization, written from the README's formulas, independent of
``phonetrain.reference``. :mod:`helpers.kernel_cases` registers the oracle and the group
``fused_bn``."""

from __future__ import annotations

import numpy as np

from .kernel_cases import Case, _conv_patches, _rand

_F64 = np.float64


def _act(y, act):
    return np.maximum(y, 0) if act == 1 else np.clip(y, 0, 6) if act == 2 else y


def _passes(y, act):
    return (y > 0) if act == 1 else ((y > 0) & (y < 6)) if act == 2 else np.ones(y.shape, bool)


def _gconv(X, weight, B, C, H, W, OC, KH, KW, stride, pad, OH, OW, groups):
    """``[B, OC, OH, OW]`` float64 grouped convolution."""
    pt = _conv_patches(X, B, C, H, W, KH, KW, stride, pad, OH, OW)
    cg, og = C // groups, OC // groups
    w = weight[:OC * cg * KH * KW].reshape(OC, cg, KH, KW).astype(_F64)
    return np.concatenate([np.einsum("bhwckl,ockl->bohw", pt[..., g * cg:(g + 1) * cg, :, :],
                                     w[g * og:(g + 1) * og]) for g in range(groups)], axis=1)


def _tile_stats(z: np.ndarray, tile: int) -> np.ndarray:
    """``[OC, T, 2]`` float64: each tile's mean and sum of squared deviations, ``z`` of shape
    ``[B, OC, P]``, tiles of ``tile`` consecutive ``(b, p)`` positions of a channel."""
    OC = z.shape[1]
    zc = z.transpose(1, 0, 2).reshape(OC, -1)
    out = []
    for i0 in range(0, zc.shape[1], tile):
        t = zc[:, i0:i0 + tile]
        m = t.mean(axis=1)
        out.append(np.stack([m, ((t - m[:, None]) ** 2).sum(axis=1)], axis=1))
    return np.stack(out, axis=1)


def _gconv_stats_fwd(B, C, H, W, OC, KH, KW, stride, pad, OH, OW, groups, tile, X, weight, Z,
                     part):
    z = _gconv(X, weight, B, C, H, W, OC, KH, KW, stride, pad, OH, OW, groups)
    Z[:z.size] = z.ravel()
    p = _tile_stats(z.reshape(B, OC, -1), tile).ravel()
    part[:p.size] = p


def _bn_act_fwd(B, C, HW, tile, act, res, eps, momentum, Z, part, gamma, beta, R, Y, mean,
                invstd, running_mean, running_var):
    """The channel statistics from the tiles' (``n_t`` outputs each): mean = sum n_t m_t / n,
    M2 = sum M2_t + sum n_t (m_t - mean)^2 (the exact combination, in any order)."""
    n = B * HW
    T = -(-n // tile)
    pm = part[:C * T * 2].reshape(C, T, 2).astype(_F64)
    cnt = np.array([min(tile, n - t * tile) for t in range(T)], _F64)
    mu = (pm[:, :, 0] * cnt).sum(axis=1) / n
    var = (pm[:, :, 1].sum(axis=1) + ((pm[:, :, 0] - mu[:, None]) ** 2 * cnt).sum(axis=1)) / n
    z = Z[:B * C * HW].reshape(B, C, HW).astype(_F64)
    c = lambda a: a[None, :, None]  # noqa: E731
    y = _act((z - c(mu)) / np.sqrt(c(var) + eps) * c(gamma[:C]) + c(beta[:C]), act)
    if res:
        y = y + R[:z.size].reshape(z.shape)
    Y[:z.size] = y.ravel()
    mean[:C], invstd[:C] = mu, 1.0 / np.sqrt(var + eps)
    running_mean[:C] = (1 - momentum) * running_mean[:C] + momentum * mu
    running_var[:C] = (1 - momentum) * running_var[:C] + momentum * (
        var * n / (n - 1) if n > 1 else var)


def _sgd64(P, V, g, lr, momentum, weight_decay):
    g = g + weight_decay * P[:g.size].astype(_F64)
    v = momentum * V[:g.size].astype(_F64) + g
    V[:g.size] = v
    P[:g.size] = P[:g.size] - lr * v


def _bn_bwd_sgd(B, C, HW, act, lr, momentum, weight_decay, X, Y, dY, mean, invstd, gamma, beta,
                Vg, Vb, dX):
    n = B * C * HW
    x, y, dy = (a[:n].reshape(B, C, HW).astype(_F64) for a in (X, Y, dY))
    d = np.where(_passes(y, act), dy, 0.0)
    c = lambda a: a[:C].astype(_F64)[None, :, None]  # noqa: E731
    xhat = (x - c(mean)) * c(invstd)
    db, dg = d.sum(axis=(0, 2)), (d * xhat).sum(axis=(0, 2))
    m = B * HW
    dX[:n] = (c(gamma) * c(invstd) / m * (m * d - db[None, :, None] - xhat * dg[None, :, None])
              ).ravel()
    _sgd64(gamma, Vg, dg, lr, momentum, weight_decay)
    _sgd64(beta, Vb, db, lr, momentum, weight_decay)


def _gconv_bwd_data(B, C, H, W, OC, KH, KW, stride, pad, OH, OW, groups, act, res, dY, weight,
                    X, R, dX):
    """Written as the adjoint: scatter each output's gradient over the taps it read."""
    cg, og = C // groups, OC // groups
    w = weight[:OC * cg * KH * KW].reshape(OC, cg, KH, KW).astype(_F64)
    dy = dY[:B * OC * OH * OW].reshape(B, OC, OH, OW).astype(_F64)
    dxp = np.zeros((B, C, H + 2 * pad + stride * OH + KH, W + 2 * pad + stride * OW + KW))
    for g in range(groups):
        wg, dyg = w[g * og:(g + 1) * og], dy[:, g * og:(g + 1) * og]
        for kh in range(KH):
            for kw in range(KW):
                contrib = np.einsum("bohw,oc->bchw", dyg, wg[:, :, kh, kw])
                dxp[:, g * cg:(g + 1) * cg, kh:kh + stride * OH:stride,
                    kw:kw + stride * OW:stride] += contrib
    dx = dxp[:, :, pad:pad + H, pad:pad + W].ravel()
    n = B * C * H * W
    if res:
        dx = dx + R[:n]
    dX[:n] = np.where(_passes(X[:n], act), dx, 0.0)


def _gconv_sgd(B, C, H, W, OC, KH, KW, stride, pad, OH, OW, groups, lr, momentum,
               weight_decay, X, dY, weight, V):
    pt = _conv_patches(X, B, C, H, W, KH, KW, stride, pad, OH, OW)
    cg, og = C // groups, OC // groups
    dy = dY[:B * OC * OH * OW].reshape(B, OC, OH, OW).astype(_F64)
    dw = np.concatenate([np.einsum("bohw,bhwckl->ockl", dy[:, g * og:(g + 1) * og],
                                   pt[..., g * cg:(g + 1) * cg, :, :]) for g in range(groups)])
    _sgd64(weight, V, dw.ravel(), lr, momentum, weight_decay)


def _gconv_wgrad_partial(B, C, H, W, OC, KH, KW, stride, pad, OH, OW, groups, S, X, dY,
                         part):
    """The README's chunks [s*Kc, min((s+1)*Kc, n)), Kc = ceil(n/S), of each weight's sum."""
    n, cg, og = B * OH * OW, C // groups, OC // groups
    pt = _conv_patches(X, B, C, H, W, KH, KW, stride, pad, OH, OW).reshape(n, C, KH, KW)
    dy = dY[:B * OC * OH * OW].reshape(B, OC, OH * OW).transpose(0, 2, 1).reshape(n, OC)
    dy = dy.astype(_F64)
    p = part[:S * OC * cg * KH * KW].reshape(S, OC, cg, KH, KW)
    kc = -(-n // S)
    for s in range(S):
        i0, i1 = min(n, s * kc), min(n, s * kc + kc)
        for g in range(groups):
            p[s, g * og:(g + 1) * og] = np.einsum("lo,lckw->ockw", dy[i0:i1, g * og:(g + 1) * og],
                                                  pt[i0:i1, g * cg:(g + 1) * cg])


def _gconv_sgd_finish(C, OC, KH, KW, groups, S, lr, momentum, weight_decay, part, weight, V):
    n = OC * C // groups * KH * KW
    g = part[:S * n].reshape(S, n).astype(_F64).sum(axis=0)
    _sgd64(weight, V, g, lr, momentum, weight_decay)


ORACLE_BN = {"gconv_stats_fwd": _gconv_stats_fwd, "bn_act_fwd": _bn_act_fwd,
             "bn_bwd_sgd": _bn_bwd_sgd,
             "gconv_bwd_data": _gconv_bwd_data, "gconv_sgd": _gconv_sgd,
             "gconv_wgrad_partial": _gconv_wgrad_partial, "gconv_sgd_finish": _gconv_sgd_finish}

# (B, C, H, W, OC, K, stride, pad, groups): MobileNetV2's stem (3x3/2), a 1x1 expand, a
# depthwise 3x3 at stride 1 and 2, a grouped convolution between, one-pixel images.
SHAPES = [(1, 1, 1, 1, 1, 1, 1, 0, 1), (3, 1, 9, 7, 8, 3, 2, 1, 1), (2, 8, 5, 6, 32, 1, 1, 0, 1),
          (2, 6, 7, 7, 6, 3, 1, 1, 6), (3, 5, 8, 9, 5, 3, 2, 1, 5), (2, 4, 6, 5, 6, 3, 1, 1, 2),
          (2, 3, 1, 1, 3, 3, 1, 1, 3)]


# Tiles of the forward statistics per shape (cycled): one output, fewer than the local size
# of 64, several tiles with a short last one, one tile longer than a channel, several outputs
# per work-item.
TILES = [(1, 64), (3, 64), (7, 200), (64, 4096), (5, 128)]


def _act_input(rng: np.random.Generator, n: int) -> np.ndarray:
    """A ReLU6 output: values in [0, 6], a fifth exactly 0 and a fifth exactly 6."""
    x = np.clip(_rand(rng, n, low=-1.0, high=7.0), 0, 6)
    x[::5], x[1::5] = 0.0, 6.0
    return x


def fused_bn_cases(rng: np.random.Generator) -> list[Case]:
    """Every fused batch-norm kernel over :data:`SHAPES`, each activation code, with and
    without the residual add, SGD with momentum and weight decay."""
    out = []
    for k, (B, C, H, W, OC, K, s, p, G) in enumerate(SHAPES):
        OH, OW = (H + 2 * p - K) // s + 1, (W + 2 * p - K) // s + 1
        dims = [B, C, H, W, OC, K, K, s, p, OH, OW, G]
        nx, ny, nw = B * C * H * W, B * OC * OH * OW, OC * C // G * K * K
        tag = f"{B}x{C}x{H}x{W} oc{OC} k{K} s{s} p{p} g{G}"
        act, res = k % 3, k % 2
        nan = lambda n: np.full(n, np.nan, np.float32)  # noqa: E731
        n = B * OH * OW
        for tile in TILES[k % len(TILES)]:
            nt = OC * -(-n // tile) * 2
            out.append(Case("gconv_stats_fwd", dims + [tile, "X", "weight", "Z", "part"],
                            {"X": _rand(rng, nx), "weight": _rand(rng, nw), "Z": nan(ny),
                             "part": nan(nt)}, ("Z", "part"),
                            label=f"gconv_stats_fwd {tag} tile={tile}", atol=1e-4, rtol=1e-3))
            zs = (_rand(rng, ny) * 3 + 2).astype(np.float32)   # off-centre: the merge's deltas
            part = _tile_stats(zs.reshape(B, OC, -1).astype(_F64), tile).astype(np.float32)
            out.append(Case("bn_act_fwd", [B, OC, OH * OW, tile, act, res, 1e-5, 0.1, "Z",
                                           "part", "gamma", "beta", "R", "Y", "mean", "invstd",
                                           "rm", "rv"],
                            {"Z": zs, "part": part.ravel(),
                             "gamma": _rand(rng, OC, low=0.5, high=1.5), "beta": _rand(rng, OC),
                             "R": _rand(rng, ny), "Y": nan(ny), "mean": nan(OC),
                             "invstd": nan(OC), "rm": _rand(rng, OC),
                             "rv": _rand(rng, OC, low=0.5, high=1.5)},
                            ("Y", "mean", "invstd", "rm", "rv"),
                            label=f"bn_act_fwd {B}x{OC}x{OH * OW} tile={tile} act={act} "
                                  f"res={res}", atol=1e-4, rtol=1e-3))
        z = _rand(rng, ny)
        zm = z[:B * OC * OH * OW].reshape(B, OC, -1).astype(_F64)
        mu, var = zm.mean(axis=(0, 2)), zm.var(axis=(0, 2))
        out.append(Case("bn_bwd_sgd", [B, OC, OH * OW, act, 0.05, 0.9, 5e-4, "X", "Y", "dY",
                                       "mean", "invstd", "gamma", "beta", "Vg", "Vb", "dX"],
                        {"X": z, "Y": _act_input(rng, ny), "dY": _rand(rng, ny),
                         "mean": mu.astype(np.float32),
                         "invstd": (1 / np.sqrt(var + 1e-5)).astype(np.float32),
                         "gamma": _rand(rng, OC), "beta": _rand(rng, OC), "Vg": _rand(rng, OC),
                         "Vb": _rand(rng, OC), "dX": nan(ny)},
                        ("gamma", "beta", "Vg", "Vb", "dX"),
                        label=f"bn_bwd_sgd {B}x{OC}x{OH * OW} act={act}", atol=1e-3, rtol=1e-3))
        for a in (0, 2):
            out.append(Case("gconv_bwd_data", dims + [a, 1 - res, "dY", "weight", "X", "R",
                                                      "dX"],
                            {"dY": _rand(rng, ny), "weight": _rand(rng, nw),
                             "X": _act_input(rng, nx), "R": _rand(rng, nx), "dX": nan(nx)},
                            ("dX",), label=f"gconv_bwd_data {tag} act={a} res={1 - res}",
                            atol=1e-6 * nw + 1e-5))
        out.append(Case("gconv_sgd", dims + [0.05, 0.9, 5e-4, "X", "dY", "weight", "V"],
                        {"X": _rand(rng, nx), "dY": _rand(rng, ny), "weight": _rand(rng, nw),
                         "V": _rand(rng, nw)},
                        ("weight", "V"), label=f"gconv_sgd {tag}", atol=1e-6 * ny + 1e-5))
        # split-K chunks: S = 1, uneven (98 = 3*25 + 23), an empty one (2 outputs, S = 3)
        S = (1, 3, 2, 4, 1, 3, 3)[k % 7]
        out.append(Case("gconv_wgrad_partial", dims + [S, "X", "dY", "part"],
                        {"X": _rand(rng, nx), "dY": _rand(rng, ny), "part": nan(S * nw)},
                        ("part",), label=f"gconv_wgrad_partial {tag} S={S}",
                        atol=1e-6 * ny + 1e-5))
        out.append(Case("gconv_sgd_finish", [C, OC, K, K, G, S, 0.05, 0.9, 5e-4, "part",
                                             "weight", "V"],
                        {"part": _rand(rng, S * nw), "weight": _rand(rng, nw),
                         "V": _rand(rng, nw)},
                        ("weight", "V"), label=f"gconv_sgd_finish {tag} S={S}"))
    return out
