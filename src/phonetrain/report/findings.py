"""The report's guidelines: findings computed from the Parquet tables, each quoting its numbers
and the rows it came from, set beside the seed paper's figures (:mod:`phonetrain.report.paper`).

Every guideline function takes DataFrames as :func:`phonetrain.results.schema.read_table`
returns them and returns one :class:`Finding`. Only runs with status ``ok`` (ran and verified)
enter a finding (``wrong``, ``failed`` and ``skipped`` runs never do); a finding whose inputs
are absent says so instead of guessing (``measured`` False). Two runs whose iteration IQRs
overlap are "within noise" (:func:`phonetrain.report.analysis.within_noise`) and left out of
speedup spans. Row references read ``runs.parquet: <run_id>`` (or
``bandwidth.parquet: <device>/<kind>[/<size>]``, ``gemm.parquet: device=<device>``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from phonetrain.report.analysis import (CPU_KERNEL, OWN_KERNELS, compute_peak, gemm_sweep,
                                        gemm_table, is_cpu, peak_share, run_label,
                                        within_noise, zero_copy)
from phonetrain.report.paper import ANCHORS, Anchor


@dataclass
class Finding:
    """One guideline: ``key`` (stable id), ``title``, ``statement`` (the guideline with its
    numbers), ``rows`` (references to the table rows behind it), ``paper`` (the seed paper's
    figures it is set beside), ``details`` (one line per comparison), and ``measured`` False
    when the data to decide was missing."""

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
    """Row references ``runs.parquet: <run_id>``."""
    return [f"runs.parquet: {r}" for r in run_ids]


def _ok(runs: pd.DataFrame) -> pd.DataFrame:
    """The verified runs (status ``ok``)."""
    return runs[runs["status"] == "ok"]


def _missing(key: str, title: str, why: str, paper: list[Anchor]) -> Finding:
    """The finding ``Not measured: <why>.`` (``measured`` False)."""
    return Finding(key, title, f"Not measured: {why}.", paper=paper, measured=False)


def _noise_note(n_noise: int, n: int) -> str:
    """A sentence counting the comparisons within noise; empty when there are none."""
    return (f" {n_noise} of {n} comparison(s) are within noise (the two runs' iteration IQRs "
            "overlap), so they show no difference." if n_noise else "")


def opencl_on_cpu(runs: pd.DataFrame) -> str | None:
    """Takes runs.parquet; returns a caveat sentence when verified OpenCL runs used a CPU
    device (``device_type`` cpu, e.g. PoCL), whose numbers measure OpenCL's overheads on the
    host's cores rather than a GPU; None otherwise."""
    ok = _ok(runs)
    cl = ok[~is_cpu(ok) & (ok["device_type"] == "cpu")]
    if cl.empty:
        return None
    names = ", ".join(sorted({f"{d} ({n})" for d, n in zip(cl["device"], cl["device_name"])}))
    return (f"Caveat: the OpenCL device of {len(cl)} verified run(s) is a CPU ({names}), so "
            "'GPU' below means that OpenCL device sharing the host's cores, not a GPU; the "
            "comparison shows the cost of the OpenCL path, not of GPU hardware.")


def gpu_vs_cpu(runs: pd.DataFrame) -> Finding:
    """Takes runs.parquet. Each verified OpenCL run's median iteration time over that of the
    fastest verified CPU run of the same model and device (a ratio, x); pairs within noise are
    counted but left out of the span. Set beside the paper's ~10x GPU slowdown
    (``ANCHORS["gpu_slowdown"]``)."""
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
    """Takes runs.parquet. Whether the best GPU/CPU iteration-time ratio per model and device
    shrinks as the model grows (``flops_per_iteration``), comparing the smallest and largest
    model; needs two models. Set beside ``ANCHORS["gpu_slowdown"]`` (the paper's ratio
    shrinking with network size)."""
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
    """Takes runs.parquet. The share of verified OpenCL iteration time spent moving data, by
    device events (``data_movement_share``) and counting idle time inside blocking transfer
    calls (``data_movement_call_share``; both defined in
    :mod:`phonetrain.results.profiling`), per placement/transfer and per run, and the launch
    gaps outside transfer calls ((``gap_ms`` - ``transfer_overhead_ms``) /
    ``iteration_median_ms``). Set beside the paper's ~91% (``ANCHORS["movement_share"]``) and
    copies ~10-15x compute (``ANCHORS["copy_vs_compute"]``)."""
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
    device and kernel version: a list of ((model, device, kernel), row a, row b)."""
    ok = _ok(runs)
    key = ["model", "device", "kernel"]
    ra = ok[(ok["placement"] == a[0]) & (ok["transfer"] == a[1])].set_index(key)
    rb = ok[(ok["placement"] == b[0]) & (ok["transfer"] == b[1])].set_index(key)
    both = ra.index.intersection(rb.index)
    return [(k, ra.loc[k], rb.loc[k]) for k in both]


def placement(runs: pd.DataFrame) -> Finding:
    """Takes runs.parquet. Staged (the host owns the tensors) over resident placement, both
    with copy transfers: the ratio of median iteration times (x) per pair of the same model,
    device and kernel version, pairs within noise counted apart."""
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
    """Takes runs.parquet. With staged placement, map/unmap transfers
    (CL_MEM_ALLOC_HOST_PTR buffers) over read/write buffer copies: ratios (x) of median
    iteration time (pairs within noise left out) and of ``transfer_ms``. Set beside published
    clpeak transfer figures for phone GPUs (``ANCHORS["phone_transfer"]``)."""
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
    """Takes runs.parquet and commands.parquet. The best GEMM throughput inside training
    (``gemm_gflops`` of :func:`~phonetrain.report.analysis.gemm_table`, 1e9 FLOP/s) on the
    CPU backend and on OpenCL, and their ratio, beside the paper's GEMM and CPU GFLOPS
    (``ANCHORS`` gpu_gemm_before, gpu_gemm_after, gpu_opt_abstract, cpu_gflops)."""
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


def kernel_optimization(gemm: pd.DataFrame, peaks: pd.DataFrame) -> Finding:
    """Takes gemm.parquet and peaks.parquet. Per device, over the verified GEMM sweep
    (:func:`~phonetrain.report.analysis.gemm_sweep`): the best GFLOPS of the project's
    optimized versions (:data:`~phonetrain.report.analysis.OWN_KERNELS`, best of them per
    shape), their median speedup over ``baseline`` across shapes, the same against CLBlast
    and the CPU backend where measured, and the best as a share of the device's measured
    compute peak (:func:`~phonetrain.report.analysis.peak_share`). Set beside the paper's
    5-15 -> 25-70 GFLOPS (second-hand) and CPU 15-30 GFLOPS. The closing advice on register
    blocking and local-memory tiling is a fixed sentence, not computed from the tables."""
    title = "Kernel optimization: GEMM GFLOPS per version"
    paper = [ANCHORS["gpu_gemm_before"], ANCHORS["gpu_gemm_after"], ANCHORS["cpu_gflops"]]
    g = gemm_sweep(gemm)
    if (g.empty or not (g["kernel"] == "baseline").any()
            or not g["kernel"].isin(OWN_KERNELS).any()):
        return _missing("kernel_optimization", title,
                        "no verified GEMM sweep with baseline and an optimized version", paper)
    parts, details, rows = [], [], []
    for dev, d in g.groupby("device"):
        piv = d.pivot_table(index="shape", columns="kernel", values="gflops", aggfunc="max")
        own = piv[[c for c in OWN_KERNELS if c in piv]].max(axis=1)
        speedup = (own / piv["baseline"]).dropna()
        best_shape = own.idxmax()
        pk, pk_name = compute_peak(peaks, dev)
        s = (f"{dev}: best optimized {own.max():.3g} GFLOPS ({best_shape}), "
             f"{speedup.median():.2g}x baseline (median over {len(speedup)} shapes, "
             f"{speedup.min():.2g}-{speedup.max():.2g}x)")
        if "clblast" in piv:
            r = (own / piv["clblast"]).dropna()
            s += f", {r.median():.2g}x CLBlast"
        if CPU_KERNEL in piv:
            r = (own / piv[CPU_KERNEL]).dropna()
            s += f", {r.median():.2g}x the CPU backend"
        if pk == pk:
            s += "; " + peak_share(own.max(), pk, pk_name)
        parts.append(s)
        details += [f"{dev} {shape}: " + ", ".join(f"{k} {v:.3g}" for k, v in r.dropna().items())
                    for shape, r in piv.iterrows()]
        rows.append(f"gemm.parquet: device={dev}")
    stmt = ("; ".join(parts) + ". The paper's optimized OpenCL GEMM went from 5-15 to 25-70 "
            "GFLOPS (about 5x) on Snapdragon phones. Register blocking with vector loads and no "
            "local memory is the first optimization to try on CPUs and Mali-class GPUs; "
            "local-memory tiling pays off where local memory is on-chip.")
    return Finding("kernel_optimization", title, stmt, rows, paper, details)


def bandwidth(bw: pd.DataFrame) -> Finding:
    """Takes bandwidth.parquet. Peak host-timed GB/s (1e9 B/s) per device and transfer kind,
    and the share of it the smallest transfer reaches (host-timed: what a training step pays,
    call overhead included); zero-copy kinds (:func:`~phonetrain.report.analysis.zero_copy`)
    reported as microseconds per call instead of GB/s. Set beside published clpeak transfer
    figures for phone GPUs (``ANCHORS["phone_transfer"]``)."""
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
    """Takes the tables of :func:`phonetrain.report.build.load_tables` (runs, commands, gemm,
    peaks, bandwidth used); returns every guideline's :class:`Finding`, in report order."""
    runs, commands = tables["runs"], tables["commands"]
    return [gpu_vs_cpu(runs), size_trend(runs), data_movement(runs), placement(runs),
            transfer_method(runs), gemm_throughput(runs, commands),
            kernel_optimization(tables["gemm"], tables["peaks"]),
            bandwidth(tables["bandwidth"])]
