"""The report's computations: summary tables in, frames and numbers out (pandas and numpy only).

Shared by :mod:`phonetrain.report.figures` and :mod:`phonetrain.report.findings`; draws
nothing and formats no report text except :func:`run_label`, :func:`opencl_label` and
:func:`peak_share`, whose wording both of them use. Inputs are DataFrames as
:func:`phonetrain.results.schema.read_table` returns them (columns and units in
:mod:`phonetrain.results.schema`: ``_ms`` milliseconds, ``_ns`` nanoseconds, ``_gflops`` /
``gflops`` 1e9 FLOP/s, ``_gbps`` / ``gbps`` 1e9 bytes/s).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

CPU_KERNEL = "cpu"                         # gemm.parquet's kernel name of the runner's CPU backend
OWN_KERNELS = ("tiled", "regblock")        # the project's optimized GEMM kernel versions
RUN_KEY = ["model", "device", "placement", "transfer", "kernel"]

SEGMENTS = [  # (column of breakdown_frame, label): data movement first, then compute and host
    ("h2d_ms", "h2d"), ("d2h_ms", "d2h"), ("mapunmap_ms", "map/unmap"), ("d2d_ms", "d2d"),
    ("host_copy_ms", "host copy (mapped)"), ("transfer_overhead_ms", "idle in transfer calls"),
    ("kernel_ms", "kernel"), ("host_other_ms", "host (load, other)"),
    ("other_gap_ms", "other launch gaps"),
]


def is_cpu(runs: pd.DataFrame) -> pd.Series:
    """Takes rows with a ``placement`` column (runs.parquet or a frame derived from it);
    returns a boolean Series on the same index, True for CPU-backend rows (placement null,
    ``none`` or empty: no OpenCL placement)."""
    return runs["placement"].isna() | runs["placement"].isin(["none", ""])


def gpu_api(r: pd.Series | dict) -> str:
    """Takes one run row; returns the API its device ran through: ``Vulkan`` (``device_api``
    vulkan, or, for a row without it, a backend whose name starts with ``vulkan``), else
    ``OpenCL``. Meaningful for device-backend rows (not :func:`is_cpu`)."""
    api = r.get("device_api") if hasattr(r, "get") else None
    if isinstance(api, str) and api:
        return "Vulkan" if api == "vulkan" else "OpenCL"
    return "Vulkan" if str(r.get("backend") or "").startswith("vulkan") else "OpenCL"


def gpu_api_label(rows) -> str:
    """The API name of a set of device-backend run rows (a DataFrame or an iterable of rows):
    ``OpenCL``, ``Vulkan``, or ``OpenCL or Vulkan`` when both occur (``OpenCL`` for none)."""
    it = (r for _, r in rows.iterrows()) if isinstance(rows, pd.DataFrame) else rows
    apis = sorted({gpu_api(r) for r in it})
    return " or ".join(apis) if apis else "OpenCL"


def run_label(r: pd.Series | dict, device: bool = True) -> str:
    """Takes one run row (``device``, ``placement``, ``transfer``, ``kernel``); returns its
    short label, ``cpu`` or ``<placement>/<transfer> <kernel>`` (``Vulkan <placement>/...``
    for a Vulkan run, :func:`gpu_api`), prefixed with ``<device>: `` when ``device``."""
    dev = f"{r['device']}: " if device else ""
    if r["placement"] in (None, "none", "") or pd.isna(r["placement"]):
        return dev + "cpu"
    api = "Vulkan " if gpu_api(r) == "Vulkan" else ""
    return dev + f"{api}{r['placement']}/{r['transfer']} {r['kernel']}"


def run_names(runs: pd.DataFrame) -> list[str]:
    """How a range names its extreme runs within one device: ``<model> <run label>``
    (:func:`run_label` without the device), one per row of ``runs``."""
    return [f"{r['model']} {run_label(r, False)}" for _, r in runs.iterrows()]


def opencl_label(runs: pd.DataFrame) -> str:
    """Takes runs.parquet rows; returns how figures name the device backends: the OpenCL
    runs' label (:func:`_api_label`), and `` + `` the Vulkan runs' (``Vulkan (CPU device:
    llvmpipe ...)``) when the rows hold Vulkan runs; a Vulkan-only study gets the Vulkan label
    alone."""
    dev = runs[~is_cpu(runs)]
    vk = pd.Series([gpu_api(r) == "Vulkan" for _, r in dev.iterrows()], index=dev.index,
                   dtype=bool)
    vulkan, opencl = dev[vk], dev[~vk]
    if not len(vulkan):
        return _api_label(runs, "OpenCL")
    if not len(opencl):
        return _api_label(vulkan, "Vulkan")
    return _api_label(opencl, "OpenCL") + " + " + _api_label(vulkan, "Vulkan")


def _api_label(runs: pd.DataFrame, api: str) -> str:
    """How figures name one API's runs, from the device type (``device_type``) of its verified
    runs: ``<api> GPU`` only when every one is a GPU (Vulkan's ``integrated_gpu``/``discrete_gpu``
    count); ``<api> (CPU device: <platforms or device names>)`` when all are CPU devices (a
    CPU driver such as PoCL, "Portable Computing Language", or lavapipe, ``llvmpipe``, is not
    a GPU); otherwise ``<api> device``."""
    cl = runs[~is_cpu(runs) & (runs["status"] == "ok")] if "status" in runs else runs[~is_cpu(runs)]
    types = {"gpu" if t.endswith("gpu") else t
             for t in cl["device_type"].dropna().str.lower()} if "device_type" in cl else set()
    if types == {"gpu"}:
        return f"{api} GPU"
    if types == {"cpu"}:
        col = "platform_name" if api == "OpenCL" else "device_name"
        plats = sorted({"PoCL" if "Portable Computing Language" in p else
                        p.split(" (")[0] if api == "Vulkan" else p   # llvmpipe (LLVM ...)
                        for p in cl[col].dropna()}) if col in cl else []
        return f"{api} (CPU device" + (f": {', '.join(plats)})" if plats else ")")
    return f"{api} device"


def several_devices(runs: pd.DataFrame) -> bool:
    """Takes runs.parquet rows; returns True when they come from more than one ``device``
    (labels then name the device)."""
    return runs["device"].nunique() > 1


def breakdown_frame(runs: pd.DataFrame, iterations: pd.DataFrame) -> pd.DataFrame:
    """Where the iterations of each verified run go.

    Takes runs.parquet and iterations.parquet; returns one row per ``ok`` run with a measured
    iteration, indexed by ``run_id``: ``model``, ``device``, ``placement``, ``transfer``,
    ``kernel``, then the median over measured iterations (ms) of each :data:`SEGMENTS` column
    and of ``wall_ms``; an empty DataFrame when no such iteration exists. Derived segments
    (per iteration, before the median; the columns they start from are defined in
    :mod:`phonetrain.results.profiling`): ``mapunmap_ms`` = map + unmap; ``host_copy_ms`` =
    ``transfer_ms`` minus the device-timed h2d + d2h + map + unmap + d2d (the host copies
    into and out of mapped buffers), at least 0; ``host_other_ms`` = ``host_ms`` minus those
    copies, at least 0; ``other_gap_ms`` = ``gap_ms`` minus ``transfer_overhead_ms`` (launch
    gaps outside transfer calls), at least 0. Where data movement overlapped kernels
    (``transfer_kernel_overlap_ms`` > 0, the pipelined placement) the device-timed movement
    segments (h2d, d2h, map/unmap, d2d) are scaled by ``exposed / device-timed movement`` so
    the overlapped time is drawn once, under ``kernel``, and the bar stays the iteration's
    length (the overlap is split over those kinds in proportion to their time). A run whose
    step time came from processes without per-command events takes its iterations from its
    ``breakdown`` process (``role``), fitted into the step as the runs table's columns are
    (:func:`phonetrain.results.runs.fit_breakdown`): the events' host cost off
    ``other_gap_ms``, every segment scaled down where the rest still exceeds the step, and
    ``wall_ms`` the step's median."""
    ok = runs[runs["status"] == "ok"]
    it = iterations[iterations["measured"] & iterations["run_id"].isin(ok["run_id"])
                    & (iterations["role"] != "step")].copy()
    if it.empty:
        return pd.DataFrame()
    moved = it[["h2d_ms", "d2h_ms", "map_ms", "unmap_ms", "d2d_ms"]].sum(axis=1)
    hidden = it["transfer_kernel_overlap_ms"].fillna(0).clip(lower=0)
    keep = ((moved - hidden).clip(lower=0) / moved).where(moved > 0, 1.0)
    for c in ("h2d_ms", "d2h_ms", "map_ms", "unmap_ms", "d2d_ms"):
        it[c] = it[c] * keep
    it["mapunmap_ms"] = it["map_ms"] + it["unmap_ms"]
    it["host_copy_ms"] = (it["transfer_ms"] - moved).clip(lower=0)
    it["host_other_ms"] = (it["host_ms"] - it["host_copy_ms"]).clip(lower=0)
    it["other_gap_ms"] = (it["gap_ms"] - it["transfer_overhead_ms"]).clip(lower=0)
    cols = [c for c, _ in SEGMENTS]
    med = it.groupby("run_id")[cols + ["wall_ms"]].median()
    return ok.set_index("run_id")[RUN_KEY].join(_fit_step(med, ok.set_index("run_id"), cols),
                                                how="inner")


def _fit_step(med: pd.DataFrame, runs: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    """``med`` (per-run segment medians) with the runs whose breakdown came from a process
    apart from the step's (``events_iteration_ms`` set) fitted into the step's median
    ``iteration_median_ms``: the excess off ``other_gap_ms``, then every segment scaled down
    where the sum still exceeds the step; their ``wall_ms`` is the step's."""
    med = med.copy()
    for rid in med.index:
        ev, step = runs.at[rid, "events_iteration_ms"], runs.at[rid, "iteration_median_ms"]
        if pd.isna(ev) or pd.isna(step) or not step > 0:
            continue
        med.at[rid, "other_gap_ms"] = max(med.at[rid, "other_gap_ms"] - max(ev - step, 0), 0)
        total = float(med.loc[rid, cols].sum())
        if total > step:
            med.loc[rid, cols] = med.loc[rid, cols] * (step / total)
        med.at[rid, "wall_ms"] = step
    return med


def with_unstable(frame_fn, runs: pd.DataFrame, *args) -> pd.DataFrame:
    """``frame_fn(runs, *args)`` (a per-run frame of verified runs, e.g. :func:`breakdown_frame`
    or :func:`gemm_table`, with a ``device`` column) plus, for every device that has no row
    there, the rows its ``unstable`` runs give when counted usable: what the at-a-glance
    table decides from under contention. Adds ``unstable`` (bool) to tell them apart; an empty
    DataFrame when neither gives a row."""
    ok = frame_fn(runs, *args)
    ok = ok.assign(unstable=False) if len(ok) else ok
    if not (runs["status"] == "unstable").any():
        return ok
    busy = frame_fn(runs.assign(status=runs["status"].replace("unstable", "ok")), *args)
    if busy.empty:
        return ok
    ids = set(runs.loc[runs["status"] == "unstable", "run_id"])
    have = set(ok["device"]) if len(ok) else set()
    busy = busy[busy.index.isin(ids) & ~busy["device"].isin(have)].assign(unstable=True)
    return pd.concat([ok, busy]) if len(ok) else busy


def gemm_table(runs: pd.DataFrame, commands: pd.DataFrame) -> pd.DataFrame:
    """GEMM throughput inside training, per verified run.

    Takes runs.parquet and commands.parquet; returns one row per ``ok`` run that ran GEMM
    kernels (commands of kind ``kernel`` named ``gemm*``), indexed by ``run_id``: ``model``,
    ``device``, ``placement``, ``transfer``, ``kernel``, ``flops_per_iteration`` (summed over
    the GEMM commands; FLOPs as the lowering counts them, 2 x multiply-accumulates),
    ``per_iteration_median_ms`` (sum over GEMM commands of their median time per iteration)
    and ``gemm_gflops`` = FLOPs / (ms x 1e6), i.e. 1e9 FLOP/s. Empty DataFrame when no run
    qualifies."""
    ok = runs[runs["status"] == "ok"].set_index("run_id")
    c = commands[(commands["kind"] == "kernel") & commands["name"].str.startswith("gemm")
                 & commands["run_id"].isin(ok.index)]
    if c.empty:
        return pd.DataFrame()
    s = c.groupby("run_id")[["flops_per_iteration", "per_iteration_median_ms"]].sum()
    s["gemm_gflops"] = s["flops_per_iteration"] / (s["per_iteration_median_ms"] * 1e6)
    return ok[RUN_KEY].join(s, how="inner")


def _num(x) -> float:
    return float("nan") if x is None or pd.isna(x) else float(x)


def estimate(r: pd.Series | dict) -> float:
    """Takes one run row; returns its location estimate of the iteration time in ms
    (``iteration_ms``, by the estimator named in ``iteration_estimator``); nan when not
    recorded."""
    return _num(r.get("iteration_ms"))


def interval(r: pd.Series | dict, ci: bool = True) -> tuple[float, float]:
    """Takes one run row; returns the interval of its location estimate in ms
    (``iteration_low_ms`` .. ``iteration_high_ms``, what every comparison uses); (nan, nan)
    when not recorded. ``ci`` is ignored (kept for callers of the older signature)."""
    return _num(r.get("iteration_low_ms")), _num(r.get("iteration_high_ms"))


def interval_name(*rows: pd.Series | dict) -> str:
    """The estimator of these rows' iteration times and their interval, from
    ``iteration_estimator`` (e.g. ``median of the measured iterations, 95% percentile-bootstrap
    CI``); several joined with `` / `` when the rows differ; ``no interval recorded`` when none
    names one."""
    names = sorted({str(r.get("iteration_estimator")) for r in rows
                    if r.get("iteration_estimator") is not None
                    and not pd.isna(r.get("iteration_estimator"))})
    return " / ".join(names) if names else "no interval recorded"


def ratio_interval(a: pd.Series | dict, b: pd.Series | dict) -> tuple[float, float]:
    """The interval of the ratio of two runs' iteration times a / b from their intervals
    (:func:`interval`): (a_low / b_high, a_high / b_low), the widest ratio the two intervals
    allow; (nan, nan) when one is missing."""
    (alo, ahi), (blo, bhi) = interval(a), interval(b)
    if any(np.isnan(x) for x in (alo, ahi, blo, bhi)) or blo <= 0 or bhi <= 0:
        return float("nan"), float("nan")
    return alo / bhi, ahi / blo


def transfer_reference_gbps(bw: pd.DataFrame, peaks: pd.DataFrame, device: str,
                            kind: str) -> float:
    """The bandwidth a real copy of ``kind`` would run at on ``device``, in GB/s: for ``d2d``
    the device memory's (the best of its event-timed d2d rate and the peaks table's read
    bandwidth), for host<->device kinds the best event-timed h2d/d2h rate of its sweep. The
    fastest plausible copy grows least with size, so judging zero-copy against it is the
    cautious choice. nan when the device has no such measurement."""
    d = bw[bw["device"] == device]
    kinds = ("d2d",) if kind == "d2d" else ("h2d", "d2h")
    vals = list(d.loc[d["kind"].isin(kinds), "device_gbps"].dropna())
    if kind == "d2d" and peaks is not None and len(peaks):
        vals.append(bandwidth_peak(peaks, device))
    vals = [v for v in vals if pd.notna(v) and v > 0]
    return float(max(vals)) if vals else float("nan")


def transfer_time_classes(bw: pd.DataFrame, peaks: pd.DataFrame | None = None,
                          ratio: float = 2.0) -> pd.DataFrame:
    """How each (device, transfer kind) sweep's time behaves with size.

    Takes bandwidth.parquet (``device``, ``kind``, ``size_bytes``, ``host_ns``,
    ``device_gbps``) and peaks.parquet; returns one row per (device, kind) with
    ``flat`` (host time at the largest size below ``ratio`` x that at the smallest),
    ``reference_gbps`` (:func:`transfer_reference_gbps`), ``copy_growth_us`` (how much a copy
    at that bandwidth would have grown over the sweep: (largest - smallest size) / bandwidth),
    ``call_us`` (median host-timed microseconds per call), ``max_bytes`` and ``cls``:

    - ``zero-copy``: flat, where a copy at the reference bandwidth would have grown by at
      least (ratio - 1) x the time at the smallest size: the transfer moves no bytes;
    - ``overhead-bound``: flat, but a copy at the reference bandwidth would have stayed
      inside the call overhead over this sweep (e.g. device-to-device copies of up to 16 MiB
      at 4 TB/s take 4 us beside 20 us of launch overhead): the sweep cannot tell, and the
      GB/s it shows is a lower bound set by the overhead;
    - ``undetermined``: flat, with no measured bandwidth to judge against;
    - ``copy``: the time grows with size.

    ``ratio`` (2x) is this report's threshold, not a published rule."""
    rows = []
    for (dev, kind), g in bw.dropna(subset=["host_ns"]).groupby(["device", "kind"]):
        g = g.sort_values("size_bytes")
        t0, t1 = float(g["host_ns"].iloc[0]) / 1e3, float(g["host_ns"].iloc[-1]) / 1e3
        s0, s1 = int(g["size_bytes"].iloc[0]), int(g["size_bytes"].iloc[-1])
        ref = transfer_reference_gbps(bw, peaks, dev, kind)
        growth = (s1 - s0) / (ref * 1e3) if ref == ref else float("nan")  # bytes / (GB/s) -> us
        flat = t1 < ratio * t0
        cls = ("copy" if not flat else "undetermined" if growth != growth else
               "zero-copy" if growth >= (ratio - 1) * t0 else "overhead-bound")
        rows.append({"device": dev, "kind": kind, "flat": flat, "reference_gbps": ref,
                     "copy_growth_us": growth, "call_us": float(g["host_ns"].median()) / 1e3,
                     "max_bytes": s1, "cls": cls})
    return pd.DataFrame(rows, columns=["device", "kind", "flat", "reference_gbps",
                                       "copy_growth_us", "call_us", "max_bytes", "cls"])


def zero_copy(bw: pd.DataFrame, peaks: pd.DataFrame | None = None,
              ratio: float = 2.0) -> pd.Series:
    """Transfer kinds judged zero-copy by :func:`transfer_time_classes`, where GB/s means
    nothing: a float Series indexed by (device, kind), the median host-timed microseconds
    per call. Kinds that grow with size, or stay flat only because the sweep ends inside the
    call overhead, or cannot be judged, are absent."""
    c = transfer_time_classes(bw, peaks, ratio)
    c = c[c["cls"] == "zero-copy"]
    return pd.Series(c["call_us"].to_numpy(), index=pd.MultiIndex.from_frame(
        c[["device", "kind"]]) if len(c) else None, dtype=float)


def gemm_sweep(gemm: pd.DataFrame) -> pd.DataFrame:
    """Takes gemm.parquet; returns its verified measurements (``status`` ok, ``gflops`` not
    null) with an added ``shape`` column, ``<gemm> <m>x<n>x<k>`` (e.g. ``gemm_nn 64x64x64``)."""
    g = gemm[(gemm["status"] == "ok") & gemm["gflops"].notna()].copy()
    g["shape"] = g["gemm"] + " " + g["m"].astype(str) + "x" + g["n"].astype(str) + "x" + \
        g["k"].astype(str)
    return g


def intensity(df: pd.DataFrame) -> pd.Series:
    """Arithmetic intensity of each GEMM row (columns ``m``, ``n``, ``k``), in FLOPs per byte
    of compulsory traffic: 2MNK FLOPs / (4 (MK + KN + 2MN)) bytes, float32 (4 bytes) with A
    and B read once and C read and written once. This is the operational intensity of the
    roofline model (Williams, Waterman, Patterson, "Roofline: an insightful visual
    performance model for multicore architectures", CACM 52(4), 2009) under perfect reuse:
    each element crosses the memory interface once."""
    m, n, k = (df[c].astype(float) for c in ("m", "n", "k"))
    return 2 * m * n * k / (4 * (m * k + k * n + 2 * m * n))


def roofline(ai: np.ndarray, peak_gflops: float, bandwidth_gbps: float) -> np.ndarray:
    """Attainable GFLOPS at arithmetic intensities ``ai`` (FLOPs/byte): min(peak compute,
    ai x peak bandwidth), the roofline bound of Williams et al. (CACM 2009); GB/s x FLOPs/byte
    is 1e9 FLOP/s."""
    return np.minimum(peak_gflops, ai * bandwidth_gbps)


def compute_peak(peaks: pd.DataFrame, device: str) -> tuple[float, str]:
    """Takes peaks.parquet and a device; returns the device's measured compute peak in GFLOPS
    and the name of the row that gave it (e.g. ``float16``), ``(nan, "")`` when the device has
    none. The peak is the best ``gflops`` over every ``compute`` row, widths float..float16
    (clpeak's method, as the runner's bench-peak measures it): a scalar chain underestimates a
    vector unit."""
    pk = peaks[(peaks["device"] == device) & (peaks["kind"] == "compute")
               & peaks["gflops"].notna()]
    if pk.empty:
        return float("nan"), ""
    r = pk.loc[pk["gflops"].idxmax()]
    return float(r["gflops"]), str(r["name"])


def bandwidth_peak(peaks: pd.DataFrame, device: str) -> float:
    """Takes peaks.parquet and a device; returns the device's best measured read bandwidth in
    GB/s (1e9 B/s) over its ``bandwidth`` rows (clpeak's ``read_float4``-style kernel), nan
    when it has none."""
    pk = peaks[peaks["device"] == device]
    return pk.loc[pk["kind"] == "bandwidth", "gbps"].max() if len(pk) else np.nan


def vector_type_words(name: str) -> str:
    """Takes a bench-peak compute row's ``name``, an OpenCL C float vector type (``float``,
    ``float2`` .. ``float16``); returns what it is in words: ``float16`` is a vector of 16
    single-precision lanes (OpenCL C 1.2, section 6.1.2), not half precision (``half``)."""
    lanes = name[len("float"):] if name.startswith("float") else ""
    if name == "float":
        return "scalar float32"
    if lanes.isdigit():
        return f"{name} vectors ({lanes} float32 lanes, not half precision)"
    return name


def roof_labels(peak_gflops: float, peak_name: str, bandwidth_gbps: float) -> tuple[str, str]:
    """The roofline's two roofs in words: (compute roof, memory roof), each with its value
    and the measurement behind it. Compute: bench-peak's best chain of OpenCL ``mad()`` over
    one vector width (:func:`vector_type_words`); memory: bench-peak's ``read_float4``
    kernel reading device global memory, which is not the host<->device transfer rate of the
    bandwidth table (h2d/d2h copies through the OpenCL API)."""
    return (f"compute roof {peak_gflops:.3g} GFLOPS: OpenCL mad() chains on "
            f"{vector_type_words(peak_name)} (bench-peak, best width)",
            f"memory roof {bandwidth_gbps:.3g} GB/s: an OpenCL kernel reading device memory "
            "(bench-peak read_float4), not the host<->device copies of the bandwidth table")


def roofline_notes(gemm: pd.DataFrame, peaks: pd.DataFrame) -> list[str]:
    """Takes gemm.parquet and peaks.parquet; returns one sentence per device whose verified
    GEMM points (:func:`gemm_sweep`) plot above its roofline (:func:`roofline` at their
    :func:`intensity`): how many, the highest ratio, and that the roofs then are not the
    device's peak, only what the OpenCL microbenchmarks reached. Points of the runner's CPU
    backend (:data:`CPU_KERNEL`) are named as such: they run compiled C outside OpenCL, which
    an OpenCL-measured roof does not bound. Devices without both roofs give nothing."""
    g = gemm_sweep(gemm)
    out = []
    for dev, d in g.groupby("device", sort=True):
        peak, name = compute_peak(peaks, dev)
        bw = bandwidth_peak(peaks, dev)
        if not (peak == peak and bw == bw):
            continue
        roof = roofline(intensity(d).to_numpy(), peak, bw)
        ratio = d["gflops"].to_numpy() / roof
        above = d[ratio > 1]
        if above.empty:
            continue
        kernels = sorted(above["kernel"].unique())
        who = ", ".join("the runner's CPU backend (compiled C with OpenMP, not OpenCL)"
                        if k == CPU_KERNEL else k for k in kernels)
        out.append(f"{dev}: {len(above)} of {len(d)} GEMM point(s) plot above the roofline "
                   f"(up to {ratio.max():.2g}x; {who}), so its roofs ({peak:.3g} GFLOPS, "
                   f"{bw:.3g} GB/s) are what bench-peak's OpenCL microbenchmarks reached, not "
                   "this device's peak")
    return out


def peak_share(gflops: float, peak: float, name: str) -> str:
    """Takes a GFLOPS figure and the device's peak from :func:`compute_peak`; returns ``NN% of
    the measured peak P GFLOPS (name)``, or, above 100%, a flag that the peak microbenchmark
    underestimates the device rather than a share over 100%."""
    if gflops > peak:
        return (f"above the measured peak {peak:.3g} GFLOPS ({name}, {gflops / peak:.2g}x): "
                "the microbenchmark underestimates the device's peak")
    return f"{100 * gflops / peak:.0f}% of the measured peak {peak:.3g} GFLOPS ({name})"


BATCH_KEY = ["device", "model", "backend", "placement", "transfer", "kernel"]


def batch_scaling(runs: pd.DataFrame) -> pd.DataFrame:
    """Takes runs.parquet; returns one row per run that has a batch size and a status of
    ``ok`` or ``oom`` (:data:`BATCH_KEY`, ``batch_size``, ``status``), with
    ``ms_per_sample`` (``iteration_median_ms / batch_size``; its interval ``low``/``high``
    from ``iteration_ci_low/high_ms``, else the IQR), ``device_buffer_mib`` and
    ``max_rss_mib`` (MiB, 2^20 bytes); NaN for ``oom`` rows. Sorted by key and batch."""
    r = runs[runs["status"].isin(["ok", "oom"]) & runs["batch_size"].notna()].copy()
    b = r["batch_size"].astype(float)
    ok = r["status"] == "ok"
    lo = r["iteration_ci_low_ms"].fillna(r["iteration_p25_ms"])
    hi = r["iteration_ci_high_ms"].fillna(r["iteration_p75_ms"])
    r["ms_per_sample"] = (r["iteration_median_ms"] / b).where(ok)
    r["ms_per_sample_low"] = (lo / b).where(ok)
    r["ms_per_sample_high"] = (hi / b).where(ok)
    r["device_buffer_mib"] = (r["device_buffer_bytes"].astype(float) / 2 ** 20).where(ok)
    r["max_rss_mib"] = (r["max_rss_bytes"].astype(float) / 2 ** 20).where(ok)
    cols = BATCH_KEY + ["batch_size", "status", "ms_per_sample", "ms_per_sample_low",
                        "ms_per_sample_high", "device_buffer_mib", "max_rss_mib"]
    return r[cols].sort_values(BATCH_KEY + ["batch_size"], na_position="first").reset_index(
        drop=True)


def largest_batch(runs: pd.DataFrame) -> pd.DataFrame:
    """Takes runs.parquet; returns one row per device x model x backend (and kernel) that
    has a run with status ``ok`` or ``oom``: ``largest_ok`` (the largest batch size that ran
    and verified), ``smallest_oom`` (the smallest that did not fit; NaN when none failed),
    ``batches`` (how many batch sizes ran), and ``fits_all`` (no batch ran out of memory).
    A batch that fits above one that did not (allocation is not monotonic on every driver)
    is reported as measured: ``largest_ok`` may exceed ``smallest_oom``."""
    s = batch_scaling(runs)
    if s.empty:
        return pd.DataFrame(columns=BATCH_KEY + ["largest_ok", "smallest_oom", "batches",
                                                 "fits_all"])
    key = s[BATCH_KEY].fillna("none")
    g = s.assign(**{c: key[c] for c in BATCH_KEY}).groupby(BATCH_KEY, sort=True)
    out = g.apply(lambda d: pd.Series({
        "largest_ok": d.loc[d["status"] == "ok", "batch_size"].max(),
        "smallest_oom": d.loc[d["status"] == "oom", "batch_size"].min(),
        "batches": d["batch_size"].nunique()}), include_groups=False).reset_index()
    out["fits_all"] = out["smallest_oom"].isna()
    return out


def training_timeline(iterations: pd.DataFrame) -> pd.DataFrame:
    """Takes iterations.parquet; returns repeat 0's rows with ``cumulative_wall_ms``: the sum
    of ``wall_ms`` (host clock) over the run's iterations up to and including each (warm-up
    included: it trains too), sorted by run and iteration. Rows keep ``loss``,
    ``heldout_loss`` and ``heldout_accuracy`` (NaN where the run did not evaluate)."""
    it = iterations[iterations["repeat"] == 0].sort_values(["run_id", "iteration"])
    return it.assign(cumulative_wall_ms=it.groupby("run_id")["wall_ms"].cumsum())


def accuracy_at(points: pd.DataFrame, t_ms: float) -> float:
    """Takes one run's evaluation rows (``cumulative_wall_ms``, ``heldout_accuracy``) in time
    order; returns the accuracy of its last evaluation at or before ``t_ms`` (NaN when none
    was that early): what the run had reached after that much training time."""
    before = points[points["cumulative_wall_ms"] <= t_ms]
    return float(before["heldout_accuracy"].iloc[-1]) if len(before) else float("nan")


def time_to_accuracy(runs: pd.DataFrame, iterations: pd.DataFrame) -> pd.DataFrame:
    """Takes runs.parquet and iterations.parquet; returns one row per verified run (status
    ``ok``) with held-out evaluations: ``run_id``, ``device``, ``model``, ``label``
    (:func:`run_label`), ``best_accuracy`` (its highest held-out accuracy), ``best_at_ms``
    (cumulative wall time of its first evaluation reaching it), ``last_ms`` (of its last
    evaluation), and per (device, model): ``target`` (the highest accuracy of any of them),
    ``reached_target_ms`` (when the run first reached it, NaN if never), ``common_ms`` (the
    earliest ``last_ms``: the longest time all of them were evaluated over) and
    ``accuracy_at_common`` (:func:`accuracy_at` that time). Sorted by device, model,
    ``reached_target_ms`` (never reached last), label."""
    cols = ["run_id", "device", "model", "label", "best_accuracy", "best_at_ms", "last_ms",
            "target", "reached_target_ms", "common_ms", "accuracy_at_common"]
    tl = training_timeline(iterations)
    ev = tl[tl["heldout_accuracy"].notna()]
    ok = runs[runs["status"] == "ok"].set_index("run_id")
    ev = ev[ev["run_id"].isin(ok.index)]
    rows = []
    for run_id, g in ev.groupby("run_id"):
        best = g["heldout_accuracy"].max()
        r = ok.loc[run_id]
        rows.append({"run_id": run_id, "device": r["device"], "model": r["model"],
                     "label": run_label(r, False), "best_accuracy": float(best),
                     "best_at_ms": float(g.loc[g["heldout_accuracy"] == best,
                                               "cumulative_wall_ms"].iloc[0]),
                     "last_ms": float(g["cumulative_wall_ms"].iloc[-1]), "_g": g})
    if not rows:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame(rows)
    grp = df.groupby(["device", "model"])
    df["target"] = grp["best_accuracy"].transform("max")
    df["common_ms"] = grp["last_ms"].transform("min")
    df["reached_target_ms"] = [
        float(r["_g"].loc[r["_g"]["heldout_accuracy"] >= r["target"], "cumulative_wall_ms"]
              .iloc[0]) if r["best_accuracy"] >= r["target"] else float("nan")
        for _, r in df.iterrows()]
    df["accuracy_at_common"] = [accuracy_at(r["_g"], r["common_ms"]) for _, r in df.iterrows()]
    df = df.sort_values(["device", "model", "reached_target_ms", "label"], na_position="last")
    return df[cols].reset_index(drop=True)


def energy_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """Takes runs.parquet; returns the verified runs (status ``ok``) that measured energy
    (``energy_per_iteration_mj`` not null: ``measure.power_sample_ms`` > 0 on a device whose
    battery voltage and current are readable, src/runner/power.c), with ``label``
    (:func:`run_label`), ``energy_per_sample_mj`` (energy per iteration / batch size, mJ) and
    ``mean_power_w`` (energy per iteration / median iteration time: mJ / ms = W). Sorted by
    device, model and energy per iteration (least first)."""
    e = runs[(runs["status"] == "ok") & runs["energy_per_iteration_mj"].notna()].copy()
    e["label"] = [run_label(r, False) for _, r in e.iterrows()]
    e["energy_per_sample_mj"] = e["energy_per_iteration_mj"] / e["batch_size"].astype(float)
    e["mean_power_w"] = e["energy_per_iteration_mj"] / e["iteration_median_ms"]
    return e.sort_values(["device", "model", "energy_per_iteration_mj"]).reset_index(drop=True)


def energy_differs(a: pd.Series | dict, b: pd.Series | dict, k: float = 2.0) -> bool:
    """Whether two runs' energies per iteration differ: their ``+- k`` standard-error
    intervals (``energy_uncertainty_mj``, src/runner/power.c) do not overlap."""
    ea, eb = float(a["energy_per_iteration_mj"]), float(b["energy_per_iteration_mj"])
    ua, ub = (float(x) if pd.notna(x) else 0.0
              for x in (a["energy_uncertainty_mj"], b["energy_uncertainty_mj"]))
    return abs(ea - eb) > k * (ua + ub)


TOO_SHORT = ("battery readable, but the measured iterations were shorter than one sampling "
             "period: measure longer (measure.iterations, measure.max_iterations) or lower "
             "measure.power_sample_ms")
UNREADABLE = "no readable battery voltage and current, or measure.power_sample_ms = 0"


def energy_gaps(runs: pd.DataFrame) -> pd.DataFrame:
    """Takes runs.parquet; returns one row per verified run (status ``ok``) without an energy
    figure: ``device``, ``run_id`` and ``why``: the runner's ``energy_caveat`` when it gave
    one (e.g. on external power: a charging phone's battery current is not its consumption),
    :data:`TOO_SHORT` when the runner read the battery (``power_samples`` > 0) yet had too
    few samples for an energy figure (src/runner/power.c needs 3), else :data:`UNREADABLE`."""
    g = runs[(runs["status"] == "ok") & runs["energy_per_iteration_mj"].isna()]
    short = g["power_samples"].fillna(0) > 0
    why = np.where(short, TOO_SHORT, UNREADABLE)
    if "energy_caveat" in g:
        why = np.where(g["energy_caveat"].notna(), g["energy_caveat"].astype(object), why)
    return pd.DataFrame({"device": g["device"], "run_id": g["run_id"],
                         "why": why}).reset_index(drop=True)



MEMORY_ROLES = [  # (runs.parquet column, label): memory by role, phonetrain.results.memory
    ("param_bytes", "parameters"), ("grad_bytes", "gradients"),
    ("optimizer_state_bytes", "optimizer state"), ("activation_bytes", "activations"),
    ("scratch_bytes", "scratch"), ("staging_bytes", "staging")]
MEMORY_KEY = ["device", "model", "batch_size"]


def _variant(g: pd.DataFrame) -> str:
    """The configurations of runs that share one plan memory: ``cpu`` and the OpenCL runs'
    kernel versions, e.g. ``cpu, baseline, tiled``."""
    cl = sorted(set(g.loc[~is_cpu(g), "kernel"].dropna()))
    return ", ".join((["cpu"] if is_cpu(g).any() else []) + cl)


def memory_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """Takes runs.parquet; returns one row per device x model x batch size x distinct memory
    by role (runs whose plans allocate the same tensors -- the CPU backend and every
    placement of one lowering -- share a row), any status: a plan's bytes are known before
    it runs, an ``oom`` run's are what did not fit. Columns: :data:`MEMORY_KEY`, the columns
    of :data:`MEMORY_ROLES` and ``plan_tensor_bytes`` (bytes), ``variant``
    (:func:`_variant`), ``oom`` (one of its runs ran out of device memory), ``ran`` (one of
    its runs ran to the end: status ``ok``, ``unstable`` or ``wrong``), ``dominant`` (the
    label of the largest role), ``dominant_share`` (its share of ``plan_tensor_bytes``) and
    ``run_ids`` (sorted). Rows without memory columns (no plan.json) are left out; sorted by
    device, model, batch and total bytes (largest first)."""
    cols = [c for c, _ in MEMORY_ROLES] + ["plan_tensor_bytes"]
    r = runs.dropna(subset=["plan_tensor_bytes", "batch_size"])
    out = []
    for key, g in r.groupby(MEMORY_KEY + cols, sort=False):
        shares = {lab: g.iloc[0][c] / key[-1] for c, lab in MEMORY_ROLES} if key[-1] else {}
        top = max(shares, key=shares.get) if shares else None
        out.append({**dict(zip(MEMORY_KEY + cols, key)), "variant": _variant(g),
                    "oom": bool((g["status"] == "oom").any()),
                    "ran": bool(g["status"].isin(["ok", "unstable", "wrong"]).any()),
                    "dominant": top,
                    "dominant_share": shares.get(top, np.nan),
                    "run_ids": sorted(g["run_id"])})
    if not out:
        return pd.DataFrame(columns=MEMORY_KEY + cols + ["variant", "oom", "ran", "dominant",
                                                         "dominant_share", "run_ids"])
    return pd.DataFrame(out).sort_values(MEMORY_KEY + ["plan_tensor_bytes"],
                                         ascending=[True, True, True, False]).reset_index(
        drop=True)
