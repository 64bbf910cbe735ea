"""The report's guidelines: findings computed from the Parquet tables, each quoting its numbers
and the rows it came from, set beside the seed paper's figures (:mod:`phonetrain.report.paper`).

Only runs with status ``ok`` (ran and verified) enter a finding (``wrong``, ``failed`` and
``skipped`` runs never do); a finding whose inputs are
absent says so instead of guessing. Row references read ``runs.parquet: <run_id>`` (or
``bandwidth.parquet: <device>/<kind>``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from phonetrain.report.figures import gemm_table, is_cpu, run_label
from phonetrain.report.paper import ANCHORS, Anchor


@dataclass
class Finding:
    """One guideline: a title, a statement with its numbers, the rows behind it, the paper's
    figures it is set beside, and ``measured`` False when the data to decide was missing."""

    key: str
    title: str
    statement: str
    rows: list[str] = field(default_factory=list)
    paper: list[Anchor] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    measured: bool = True


def _span(values, unit: str) -> str:
    """``a`` or ``a to b`` (min to max) with the unit: ``x`` ratios or ``%`` shares."""
    v = [float(x) for x in values if pd.notna(x)]
    if not v:
        return "n/a"
    f = (lambda x: f"{x:.1%}") if unit == "%" else (lambda x: f"{x:.3g}{unit}")
    lo, hi = min(v), max(v)
    return f(lo) if np.isclose(lo, hi) else f"{f(lo)} to {f(hi)} (median {f(np.median(v))})"


def _ref(run_ids) -> list[str]:
    return [f"runs.parquet: {r}" for r in run_ids]


def _ok(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[runs["status"] == "ok"]


def _missing(key: str, title: str, why: str, paper: list[Anchor]) -> Finding:
    return Finding(key, title, f"Not measured: {why}.", paper=paper, measured=False)


def within_noise(a: pd.Series | dict, b: pd.Series | dict) -> bool:
    """True when two runs' iteration IQRs (``iteration_p25_ms``..``iteration_p75_ms``)
    overlap: their difference is within the run-to-run spread, not a speedup or slowdown."""
    lo = ("iteration_p25_ms", "iteration_p75_ms")
    if any(pd.isna(x[c]) for x in (a, b) for c in lo):
        return False
    return bool(a[lo[0]] <= b[lo[1]] and b[lo[0]] <= a[lo[1]])


def _noise_note(n_noise: int, n: int) -> str:
    return (f" {n_noise} of {n} comparison(s) are within noise (the two runs' iteration IQRs "
            "overlap), so they show no difference." if n_noise else "")


def zero_copy(bw: pd.DataFrame, ratio: float = 2.0, min_span: int = 256) -> pd.Series:
    """Per (device, kind) of ``bandwidth.parquet``: the median host-timed microseconds per
    call where the call is zero-copy, i.e. its host time at the largest size is below
    ``ratio`` x the time at the smallest (time does not grow with size, so GB/s is
    meaningless); kinds whose time grows are absent. Only sweeps whose sizes span at least
    ``min_span`` x are judged (over a short sweep of small sizes a real copy's time is all
    call overhead and looks constant too). Index (device, kind), float us."""
    out = {}
    for key, g in bw.dropna(subset=["host_ns"]).groupby(["device", "kind"]):
        g = g.sort_values("size_bytes")
        span = g["size_bytes"].iloc[-1] / max(int(g["size_bytes"].iloc[0]), 1)
        if span >= min_span and g["host_ns"].iloc[-1] < ratio * g["host_ns"].iloc[0]:
            out[key] = float(g["host_ns"].median()) / 1e3
    return pd.Series(out, dtype=float)


def opencl_on_cpu(runs: pd.DataFrame) -> str | None:
    """A caveat when verified OpenCL runs used a CPU device (e.g. PoCL on this host): their
    numbers measure OpenCL's overheads on the same cores, not a GPU."""
    ok = _ok(runs)
    cl = ok[~is_cpu(ok) & (ok["device_type"] == "cpu")]
    if cl.empty:
        return None
    names = ", ".join(sorted({f"{d} ({n})" for d, n in zip(cl["device"], cl["device_name"])}))
    return (f"Caveat: the OpenCL device of {len(cl)} verified run(s) is a CPU ({names}), so "
            "'GPU' below means that OpenCL device sharing the host's cores, not a GPU; the "
            "comparison shows the cost of the OpenCL path, not of GPU hardware.")


def gpu_vs_cpu(runs: pd.DataFrame) -> Finding:
    """OpenCL iteration time over the CPU's, per model and device (median ms)."""
    title, paper = "GPU vs CPU training time", [ANCHORS["gpu_slowdown"]]
    ok = _ok(runs)
    cpu = ok[is_cpu(ok)].groupby(["model", "device"])["iteration_median_ms"].min()
    pairs = []
    for _, r in ok[~is_cpu(ok)].iterrows():
        c = cpu.get((r["model"], r["device"]))
        if c is not None and c > 0:
            cid = ok[is_cpu(ok) & (ok["model"] == r["model"]) & (ok["device"] == r["device"])
                     & (ok["iteration_median_ms"] == c)]["run_id"].iloc[0]
            crow = ok[ok["run_id"] == cid].iloc[0]
            pairs.append((r, cid, c, r["iteration_median_ms"] / c, within_noise(r, crow)))
    if not pairs:
        return _missing("gpu_vs_cpu", title, "no model has both a verified CPU run and a "
                        "verified OpenCL run on the same device", paper)
    noise = np.array([p[4] for p in pairs])
    clear_pairs = [p for p in pairs if not p[4]]  # difference exceeds the runs' spread
    clear = np.array([p[3] for p in clear_pairs])
    details = [f"{r['model']} on {r['device']}, {run_label(r, False)}: "
               f"{r['iteration_median_ms']:.3g} ms vs CPU {c:.3g} ms = "
               + ("within noise (IQRs overlap)" if n else f"{q:.3g}x")
               for r, _, c, q, n in pairs]
    if not clear_pairs:
        stmt = (f"Across {len(pairs)} OpenCL/CPU pairing(s) the GPU's iteration time is within "
                "noise of the CPU's in every pairing (iteration IQRs overlap): no speedup or "
                "slowdown can be claimed.")
    else:
        best = min(clear_pairs, key=lambda p: p[3])
        verdict = ("slower than the CPU in every pairing" if (clear > 1).all() else
                   "faster than the CPU in every pairing" if (clear < 1).all() else
                   "faster than the CPU in some pairings and slower in others")
        beyond = " beyond the noise" if noise.any() else ""
        advice = (f"Train on the CPU: no verified GPU configuration beat it{beyond}."
                  if (clear > 1).all() else
                  f"Use the GPU for {best[0]['model']} with {run_label(best[0], False)}.")
        stmt = (f"Across {len(clear_pairs)} OpenCL/CPU pairing(s){beyond} the GPU took "
                f"{_span(clear, 'x')} the CPU's median iteration time: it is {verdict}. Best "
                f"GPU case: {best[0]['model']}, {run_label(best[0])} at {best[3]:.3g}x. "
                f"{advice}" + _noise_note(int(noise.sum()), len(pairs)))
    rows = _ref(sorted({p[0]["run_id"] for p in pairs} | {p[1] for p in pairs}))
    return Finding("gpu_vs_cpu", title, stmt, rows, paper, details)


def size_trend(runs: pd.DataFrame) -> Finding:
    """Does the GPU/CPU ratio shrink as the model grows (FLOPs per iteration)?"""
    title, paper = "GPU/CPU ratio vs model size", [ANCHORS["gpu_slowdown"]]
    ok = _ok(runs)
    cpu = ok[is_cpu(ok)].set_index(["model", "device"])
    gpu = ok[~is_cpu(ok)]
    best = []
    for (model, device), g in gpu.groupby(["model", "device"]):
        if (model, device) not in cpu.index:
            continue
        c = cpu.loc[[(model, device)]].sort_values("iteration_median_ms").iloc[0]
        r = g.sort_values("iteration_median_ms").iloc[0]
        flops = r["flops_per_iteration"]
        best.append((model, device, flops, r["iteration_median_ms"] / c["iteration_median_ms"],
                     r["run_id"], c["run_id"]))
    best = [b for b in best if pd.notna(b[2])]
    if len({b[0] for b in best}) < 2:
        return _missing("size_trend", title, "fewer than two models with verified CPU and "
                        "OpenCL runs on one device", paper)
    best.sort(key=lambda b: b[2])
    details = [f"{m} on {d} ({f / 1e6:.3g} MFLOP/iteration): best GPU / CPU = {q:.3g}x"
               for m, d, f, q, _, _ in best]
    small, large = best[0], best[-1]
    trend = "shrinks" if large[3] < small[3] else "does not shrink"
    stmt = (f"The best GPU/CPU time ratio {trend} with model size: {small[3]:.3g}x for "
            f"{small[0]} ({small[2] / 1e6:.3g} MFLOP/iteration) vs {large[3]:.3g}x for "
            f"{large[0]} ({large[2] / 1e6:.3g} MFLOP/iteration).")
    rows = _ref(sorted({b[4] for b in best} | {b[5] for b in best}))
    return Finding("size_trend", title, stmt, rows, paper, details)


def data_movement(runs: pd.DataFrame) -> Finding:
    """Share of OpenCL iteration time spent moving data, per placement."""
    title = "Data movement share of GPU training time"
    paper = [ANCHORS["movement_share"], ANCHORS["copy_vs_compute"]]
    gpu = _ok(runs)[~is_cpu(_ok(runs))].dropna(subset=["data_movement_share",
                                                        "data_movement_call_share"])
    if gpu.empty:
        return _missing("data_movement", title, "no verified OpenCL run", paper)
    by = gpu.groupby(["placement", "transfer"])["data_movement_share"].median()
    details = [f"{p}/{t}: median share {s:.1%}" for (p, t), s in by.items()]
    details += [f"{r['model']} {run_label(r)}: {r['data_movement_share']:.1%}, "
                f"{r['data_movement_call_share']:.1%} with call overhead "
                f"(transfer {r['transfer_ms']:.3g} ms, kernels {r['kernel_ms']:.3g} ms, "
                f"transfer/kernel {r['transfer_ms'] / r['kernel_ms']:.3g}x)"
                for _, r in gpu.iterrows() if r["kernel_ms"] > 0]
    top = gpu.loc[gpu["data_movement_share"].idxmax()]
    shares = gpu["data_movement_share"].to_numpy()
    calls = gpu["data_movement_call_share"].to_numpy()
    gaps = ((gpu["gap_ms"] - gpu["transfer_overhead_ms"]) / gpu["iteration_median_ms"]).to_numpy()
    details.append(f"launch gaps outside transfer calls (no command running): "
                   f"{_span(gaps, '%')} of the median iteration")
    advice = ("Data movement dominates: keep tensors resident on the device and move only the "
              "batch and the loss." if np.median(calls) > 0.5 else
              "Data movement is not the dominant cost here; launch gaps outside transfer "
              f"calls take {_span(gaps, '%')}, so fewer, larger kernels come first.")
    stmt = (f"Data movement took {_span(shares, '%')} of OpenCL iteration time over {len(gpu)} "
            f"verified run(s) by device events, {_span(calls, '%')} counting the idle time "
            "inside blocking transfer calls as a host-side profiler would (paper: ~91%). "
            f"Highest: {top['model']}, {run_label(top)} at {top['data_movement_share']:.1%}"
            f" ({top['data_movement_call_share']:.1%} with call overhead). {advice}")
    return Finding("data_movement", title, stmt, _ref(gpu["run_id"]), paper, details)


def _paired(runs: pd.DataFrame, a: tuple[str, str], b: tuple[str, str]) -> list[tuple]:
    """Verified OpenCL runs with (placement, transfer) ``a`` and ``b`` on the same model,
    device and kernel version."""
    ok = _ok(runs)
    key = ["model", "device", "kernel"]
    ra = ok[(ok["placement"] == a[0]) & (ok["transfer"] == a[1])].set_index(key)
    rb = ok[(ok["placement"] == b[0]) & (ok["transfer"] == b[1])].set_index(key)
    both = ra.index.intersection(rb.index)
    return [(k, ra.loc[k], rb.loc[k]) for k in both]


def placement(runs: pd.DataFrame) -> Finding:
    """Staged (host owns tensors) vs resident placement, copy transfers."""
    title, paper = "Placement: resident vs staged tensors", [ANCHORS["movement_share"]]
    pairs = _paired(runs, ("resident", "copy"), ("staged", "copy"))
    if not pairs:
        return _missing("placement", title, "no verified resident/copy and staged/copy pair "
                        "of the same model, device and kernel", paper)
    noise = [within_noise(r, s) for _, r, s in pairs]
    q = [s["iteration_median_ms"] / r["iteration_median_ms"]
         for (_, r, s), n in zip(pairs, noise) if not n]
    details = [f"{k[0]} on {k[1]}, kernel {k[2]}: staged {s['iteration_median_ms']:.3g} ms "
               f"vs resident {r['iteration_median_ms']:.3g} ms = "
               + ("within noise (IQRs overlap)" if n else
                  f"{s['iteration_median_ms'] / r['iteration_median_ms']:.3g}x")
               + f"; transfer {s['transfer_ms']:.3g} vs {r['transfer_ms']:.3g} ms"
               for (k, r, s), n in zip(pairs, noise)]
    stmt = ((f"Staging every tensor through the host made an iteration {_span(q, 'x')} as long "
             f"as keeping tensors resident ({len(q)} pair(s) outside noise)" if q else
             f"Staged and resident iteration times are within noise in all {len(pairs)} "
             "pair(s)") + ", the regime of frameworks that fall back to the host between "
            "operators." + _noise_note(sum(noise), len(pairs)))
    rows = _ref(sorted({r["run_id"] for _, r, _ in pairs} | {s["run_id"] for _, _, s in pairs}))
    return Finding("placement", title, stmt, rows, paper, details)


def transfer_method(runs: pd.DataFrame) -> Finding:
    """map/unmap (CL_MEM_ALLOC_HOST_PTR) vs read/write buffer copies, staged placement."""
    title, paper = "Transfers: map/unmap vs read/write copies", [ANCHORS["phone_transfer"]]
    pairs = _paired(runs, ("staged", "copy"), ("staged", "map"))
    if not pairs:
        return _missing("transfer_method", title, "no verified staged/copy and staged/map pair",
                        paper)
    q = [m["transfer_ms"] / c["transfer_ms"] for _, c, m in pairs if c["transfer_ms"] > 0]
    noise = [within_noise(c, m) for _, c, m in pairs]
    t = [m["iteration_median_ms"] / c["iteration_median_ms"]
         for (_, c, m), n in zip(pairs, noise) if not n]
    details = [f"{k[0]} on {k[1]}, kernel {k[2]}: map {m['iteration_median_ms']:.3g} ms "
               f"(transfer {m['transfer_ms']:.3g}) vs copy {c['iteration_median_ms']:.3g} ms "
               f"(transfer {c['transfer_ms']:.3g})" + ("; within noise (IQRs overlap)" if n else "")
               for (k, c, m), n in zip(pairs, noise)]
    better = ("no difference outside noise" if not t else "map/unmap is faster here"
              if max(t) < 1 else "copies are faster here" if min(t) > 1
              else "neither wins everywhere")
    stmt = (f"With staged tensors, map/unmap iterations took "
            f"{_span(t, 'x') if t else 'the same as'} the copy time "
            f"({better}); data-movement time {_span(q, 'x')}. On phones with unified memory "
            "map is zero-copy (clpeak); the answer is per device."
            + _noise_note(sum(noise), len(pairs)))
    rows = _ref(sorted({c["run_id"] for _, c, _ in pairs} | {m["run_id"] for _, _, m in pairs}))
    return Finding("transfer_method", title, stmt, rows, paper, details)


def gemm_throughput(runs: pd.DataFrame, commands: pd.DataFrame) -> Finding:
    """Best GEMM GFLOPS inside training, GPU vs CPU, beside the paper's figures."""
    title = "GEMM throughput: GPU kernels vs CPU"
    paper = [ANCHORS["gpu_gemm_before"], ANCHORS["gpu_gemm_after"],
             ANCHORS["gpu_opt_abstract"], ANCHORS["cpu_gflops"]]
    g = gemm_table(runs, commands)
    if g.empty:
        return _missing("gemm_throughput", title, "no verified run with GEMM kernels", paper)
    g = g.reset_index()
    details = [f"{r['model']} {run_label(r)}: {r['gemm_gflops']:.3g} GFLOPS"
               for _, r in g.iterrows()]
    parts, rows, best = [], [], {}
    for name, sub in (("CPU", g[is_cpu(g)]), ("GPU (OpenCL)", g[~is_cpu(g)])):
        if len(sub):
            b = best[name] = sub.loc[sub["gemm_gflops"].idxmax()]
            parts.append(f"best {name} {b['gemm_gflops']:.3g} GFLOPS ({b['model']}, "
                         f"{run_label(b)})")
            rows.append(b["run_id"])
    stmt = "GEMM inside training reached: " + "; ".join(parts) + "."
    if len(best) == 2:
        q = best["GPU (OpenCL)"]["gemm_gflops"] / best["CPU"]["gemm_gflops"]
        stmt += (f" Best GPU over best CPU: {q:.3g}x (paper: optimized GPU GEMM 25-70 vs CPU "
                 "15-30 GFLOPS, about 2x).")
    return Finding("gemm_throughput", title, stmt, _ref(rows), paper, details)


def bandwidth(bw: pd.DataFrame) -> Finding:
    """Peak host-timed GB/s per device and transfer kind, and how far small transfers fall
    below it (host-timed: what a training step pays, call overhead included)."""
    title, paper = "Host <-> device bandwidth", [ANCHORS["phone_transfer"]]
    bw = bw.dropna(subset=["host_gbps"])
    if bw.empty:
        return _missing("bandwidth", title, "no bandwidth sweep", paper)
    zc = zero_copy(bw)  # GB/s of a call whose time does not grow with size is meaningless
    zc_text = [f"{d} {k}: zero-copy: constant ~{us:.3g} us per {k} regardless of size"
               for (d, k), us in zc.items()]
    zc_rows = [f"bandwidth.parquet: {d}/{k}" for d, k in zc.index]
    bw = bw[~bw.set_index(["device", "kind"]).index.isin(zc.index)]
    if bw.empty:
        return Finding("bandwidth", title, "; ".join(zc_text) + ".", zc_rows, paper, zc_text)
    peak = bw.loc[bw.groupby(["device", "kind"])["host_gbps"].idxmax()]
    small = bw.loc[bw.groupby(["device", "kind"])["size_bytes"].idxmin()]
    frac = (small.set_index(["device", "kind"])["host_gbps"]
            / peak.set_index(["device", "kind"])["host_gbps"])
    details = [f"{r['device']} {r['kind']}: peak {r['host_gbps']:.3g} GB/s host-timed "
               f"({r['device_gbps']:.3g} GB/s event-timed) at {int(r['size_bytes'])} bytes"
               for _, r in peak.iterrows()]
    details += [f"{d} {k}: {int(small.set_index(['device', 'kind']).loc[(d, k), 'size_bytes'])}"
                f" bytes reach {f:.1%} of the peak" for (d, k), f in frac.items()]
    stmt = ("Peak host-timed bandwidth: " + ", ".join(
        f"{r['device']} {r['kind']} {r['host_gbps']:.3g} GB/s" for _, r in peak.iterrows()) +
        f". The smallest transfers reach a median {frac.median():.1%} of their kind's peak" +
        (": per-call overhead dominates small tensors, so fewer, larger transfers pay off."
         if frac.median() < 0.5 else ".")) + "".join(f" {z}." for z in zc_text)
    details += zc_text
    rows = [f"bandwidth.parquet: {r['device']}/{r['kind']}/{int(r['size_bytes'])}"
            for _, r in pd.concat([peak, small]).iterrows()] + zc_rows
    return Finding("bandwidth", title, stmt, rows, paper, details)


def all_findings(tables: dict[str, pd.DataFrame]) -> list[Finding]:
    """Every guideline, in report order."""
    from phonetrain.report.gemm import kernel_optimization  # imports this module
    runs, commands = tables["runs"], tables["commands"]
    return [gpu_vs_cpu(runs), size_trend(runs), data_movement(runs), placement(runs),
            transfer_method(runs), gemm_throughput(runs, commands),
            kernel_optimization(tables["gemm"], tables["peaks"]),
            bandwidth(tables["bandwidth"])]
