"""The report's guidelines: findings computed from the Parquet tables, each one or two sentences
and one compact table, set beside the seed paper's figures (:mod:`phonetrain.report.paper`).

Every guideline function takes DataFrames as :func:`phonetrain.results.schema.read_table`
returns them and returns one :class:`Finding`. Only runs with status ``ok`` (ran and verified)
give a finding its figures; ``wrong``, ``failed`` and ``skipped`` runs never do, and
``unstable`` runs enter only the comparisons of two runs, where a difference from them is
stated only when it survives their noise, marked "measured under contention"
(:func:`phonetrain.report.wording.judge`). A finding
whose inputs are absent says so instead of guessing (``measured`` False). Its wording comes from
:mod:`phonetrain.report.wording` applied to the figure it states, and names the measure (host
clock, device events, call time). Two runs differ only when both are usable and the intervals of
their location estimates (runs.parquet ``iteration_ms``) separate
(:func:`run_verdict`); otherwise the verdict is "cannot tell" with
its reason. Trends and comparisons are per
device: figures of different devices are never set against each other. Row references read
``runs.parquet: <run_id>`` (or ``bandwidth.parquet: <device>/<kind>``,
``gemm.parquet: device=<device>``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

import phonetrain.report.wording as w
from phonetrain.report.analysis import (BATCH_KEY, CPU_KERNEL, MEMORY_ROLES, OWN_KERNELS,
                                        batch_scaling, gpu_api_label, memory_frame,
                                        compute_peak, energy_differs, energy_frame,
                                        energy_gaps, gemm_sweep, largest_batch,
                                        estimate, gemm_table, interval, interval_name,
                                        is_cpu, peak_share, ratio_interval, run_label, run_names,
                                        time_to_accuracy, transfer_time_classes)
from phonetrain.report.paper import ANCHORS, Anchor


@dataclass
class Table:
    """A finding's compact table: ``columns`` (headers, units in them) and ``rows`` (display
    strings, one list per row)."""

    columns: list[str]
    rows: list[list[str]]


@dataclass
class Finding:
    """One guideline: ``key`` (stable id, the HTML anchor ``finding-<key>``), ``title``,
    ``statement`` (one or two sentences with the numbers and the measure they use), ``table``
    (the comparisons behind it), ``rows`` (references to the table rows it came from),
    ``paper`` (the seed paper's figures it is set beside), and ``measured`` False when the
    data to decide was missing."""

    key: str
    title: str
    statement: str
    rows: list[str] = field(default_factory=list)
    paper: list[Anchor] = field(default_factory=list)
    table: Table | None = None
    measured: bool = True


def _ref(run_ids) -> list[str]:
    """Row references ``runs.parquet: <run_id>``."""
    return [f"runs.parquet: {r}" for r in run_ids]


def _ok(runs: pd.DataFrame) -> pd.DataFrame:
    """The verified runs (status ``ok``); unstable runs are kept out like wrong ones."""
    return runs[runs["status"] == "ok"]


def _measured(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs with an iteration time to compare: ``ok`` and ``unstable`` (the comparison's
    verdict says when an unstable side leaves it undecided)."""
    return runs[runs["status"].isin(["ok", "unstable"])]


def _baseline_first(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` ordered usable (``ok``) first, then by iteration time: the first row per group
    is the baseline a comparison uses."""
    return runs.assign(_unstable=runs["status"] != "ok").sort_values(
        ["_unstable", "iteration_ms"]).drop(columns="_unstable")


# Settings both runs of a guideline's comparison must share (before/after comparisons of one
# run use phonetrain.results.history.SETTINGS).
PAIR_SETTINGS = ("batch_size", "dataset")


def run_side(r: pd.Series | dict, settings=PAIR_SETTINGS) -> w.Side:
    """One run row as a side of a comparison (:class:`phonetrain.report.wording.Side`): its
    ``iteration_ms`` with its interval, status and reason, estimator, the ``settings``
    columns it must share with the other side, and its conditions."""
    reason = r.get("status_reason")
    return w.Side(estimate(r), *interval(r), status=str(r.get("status")),
                  reason="" if reason is None or pd.isna(reason) else str(reason),
                  estimator=None if pd.isna(r.get("iteration_estimator")) else
                  r.get("iteration_estimator"),
                  settings={k: r.get(k) for k in settings}, conditions=w.conditions(r))


def run_verdict(a: pd.Series | dict, b: pd.Series | dict,
                settings=PAIR_SETTINGS) -> w.Verdict:
    """Takes two run rows; returns the :class:`~phonetrain.report.wording.Verdict` of b's
    iteration time against a's (:func:`phonetrain.report.wording.judge`): ``faster`` means b
    is faster."""
    return w.judge(run_side(a, settings), run_side(b, settings))


def _missing(key: str, title: str, why: str, paper: list[Anchor]) -> Finding:
    """The finding ``Not measured: <why>.`` (``measured`` False)."""
    return Finding(key, title, f"Not measured: {why}.", paper=paper, measured=False)


def unstable_as_ok(runs: pd.DataFrame) -> pd.DataFrame:
    """runs.parquet with every ``unstable`` run counted as usable: what a figure is computed
    from, marked measured under contention, when no usable run measured it."""
    return runs.assign(status=runs["status"].replace("unstable", "ok"))


CONTENDED_ONLY = ("Measured under contention only: every OpenCL run behind it is unstable "
                  "(see Unstable runs), so its times may be inflated; At a glance states "
                  "only what survives that noise.")


def _from_unstable(fn, runs: pd.DataFrame, missing: Finding) -> Finding:
    """``fn``'s finding computed from the unstable runs, its statement opened by
    :data:`CONTENDED_ONLY`, when no usable run measured it; ``missing`` when none did."""
    if not (runs["status"] == "unstable").any():
        return missing
    f = fn(unstable_as_ok(runs))
    return replace(f, statement=f"{CONTENDED_ONLY} {f.statement}") if f.measured else missing


def _flag(r: pd.Series | dict, col: str) -> bool | None:
    """A nullable boolean column of a run row as True, False or None."""
    v = r.get(col)
    return None if v is None or pd.isna(v) else bool(v)


def opencl_on_cpu(runs: pd.DataFrame) -> str | None:
    """Takes runs.parquet; returns a caveat sentence when OpenCL runs that reached their
    device (any status with a recorded ``device_type``: verified, unstable or wrong alike)
    used a CPU device (``device_type`` cpu, e.g. PoCL), whose numbers measure OpenCL's
    overheads on the host's cores rather than a GPU; it says "every" when no OpenCL run
    used anything else. None when no OpenCL run used a CPU device."""
    ran = runs[~is_cpu(runs) & runs["device_type"].notna()]
    cl = ran[ran["device_type"] == "cpu"]
    if cl.empty:
        return None
    names = ", ".join(sorted({f"{d} ({n})" for d, n in zip(cl["device"], cl["device_name"])}))
    which = ("every OpenCL device of this study is a CPU" if len(cl) == len(ran) else
             f"the OpenCL device of {len(cl)} of the {len(ran)} OpenCL run(s) is a CPU")
    return (f"Caveat: {which} ({names}), so 'GPU' below means that OpenCL device sharing the "
            "host's cores, not a GPU; the comparison shows the cost of the OpenCL path, not "
            "of GPU hardware.")


# ---------------------------------------------------------------- GPU vs CPU

def gpu_cpu_pairs(runs: pd.DataFrame) -> pd.DataFrame:
    """Every OpenCL run with an iteration time (``ok`` or ``unstable``) set against the CPU
    run of the same model and device (the fastest usable one, else the fastest unstable one).
    Takes runs.parquet; returns one row per pair: ``device``, ``model``, ``run_id``,
    ``cpu_run_id``, ``label`` (the OpenCL run), ``gpu_ms``, ``cpu_ms`` (location estimates of
    the iteration time, ``iteration_ms``, host clock), ``ratio`` = gpu / cpu,
    ``ratio_low``/``ratio_high`` (:func:`~phonetrain.report.analysis.ratio_interval`),
    ``verdict`` (:class:`~phonetrain.report.wording.Verdict` of the OpenCL run against the CPU
    run), ``no_difference`` (no difference stated), ``interval`` (the estimator's name),
    ``gpu``/``cpu`` (the two rows)."""
    ok = _measured(runs)
    cpu = _baseline_first(ok[is_cpu(ok)]).drop_duplicates(["model", "device"])
    cpu = cpu.set_index(["model", "device"])
    out = []
    for _, r in ok[~is_cpu(ok)].iterrows():
        if (r["model"], r["device"]) not in cpu.index:
            continue
        c = cpu.loc[(r["model"], r["device"])]
        if not estimate(c) > 0:
            continue
        lo, hi = ratio_interval(r, c)
        v = run_verdict(c, r)
        out.append({"device": r["device"], "model": r["model"], "run_id": r["run_id"],
                    "cpu_run_id": c["run_id"], "label": run_label(r, False),
                    "gpu_ms": estimate(r), "cpu_ms": estimate(c),
                    "ratio": estimate(r) / estimate(c),
                    "ratio_low": lo, "ratio_high": hi, "verdict": v,
                    "no_difference": not v.stated, "interval": interval_name(r, c),
                    "gpu": r, "cpu": c})
    cols = ["device", "model", "run_id", "cpu_run_id", "label", "gpu_ms", "cpu_ms", "ratio",
            "ratio_low", "ratio_high", "verdict", "no_difference", "interval", "gpu", "cpu"]
    return pd.DataFrame(out, columns=cols)


def best_pairs(pairs: pd.DataFrame) -> pd.DataFrame:
    """The fastest OpenCL configuration per (device, model) of :func:`gpu_cpu_pairs`."""
    return pairs.sort_values("ratio").drop_duplicates(["device", "model"]).sort_values(
        ["device", "model"])


def _device_advice(dev: str, b: pd.DataFrame) -> str:
    """One clause per device from its best pairs: where the GPU wins, loses or cannot be told
    apart, each verdict with its reason."""
    v = list(b["verdict"])
    parts = [f"{m} {w.times(q, lo, hi)} ({w.gpu_vs_cpu_text(x)})" for m, q, lo, hi, x in
             zip(b["model"], b["ratio"], b["ratio_low"], b["ratio_high"], v)]
    words = [x.word for x in v]
    advice = ("use the GPU" if all(x == "faster" for x in words) else
              "train on the CPU" if all(x == "slower" for x in words) else
              "cannot tell" if not any(x.stated for x in v) else "depends on the model")
    return f"{dev}: {', '.join(parts)}: {advice}"


def gpu_vs_cpu(runs: pd.DataFrame) -> Finding:
    """Takes runs.parquet. Per device and model, the fastest OpenCL configuration's iteration
    time (``iteration_ms``, host clock) over the CPU run's, with the ratio's interval and the
    verdict of :func:`run_verdict` (cannot tell: intervals
    overlap, unstable side, no interval, settings differ; a difference from an unstable side
    only when it survives its noise, marked measured under contention). Set beside the
    paper's ~10x GPU slowdown (``ANCHORS["gpu_slowdown"]``). Both runs' measurement
    conditions are shown: a CPU baseline measured under contention spoils every ratio built
    on it."""
    title, paper = "GPU vs CPU training time", [ANCHORS["gpu_slowdown"]]
    pairs = gpu_cpu_pairs(runs)
    if pairs.empty:
        return _missing("gpu_vs_cpu", title, "no model has both a CPU run and an OpenCL run "
                        "with an iteration time on the same device", paper)
    best = best_pairs(pairs)
    stmt = (f"Fastest {gpu_api_label(list(best['gpu']))} configuration over the CPU run, "
            "iteration time (host clock, "
            f"{'; '.join(sorted(set(pairs['interval'])))}): "
            + "; ".join(_device_advice(d, b) for d, b in best.groupby("device")) + ".")
    n = int(pairs["no_difference"].sum())
    if n:
        stmt += f" {n} of {len(pairs)} pairing(s): cannot tell (reasons in the table)."
    busy = sorted({c["run_id"] for c in pairs["cpu"] if w.contended(c)})
    if busy:
        stmt += (f" Suspect: CPU baseline(s) {', '.join(busy)} were measured while other "
                 f"processes used more than {w.CONTENDED_SHARE:.0%} of the CPU, which inflates "
                 "the CPU's time and flatters the GPU.")
    rows = [[p["device"], p["model"], p["label"],
             w.ms_interval(p["gpu_ms"], *interval(p["gpu"])),
             w.ms_interval(p["cpu_ms"], *interval(p["cpu"])),
             w.times(p["ratio"], p["ratio_low"], p["ratio_high"]),
             w.gpu_vs_cpu_text(p["verdict"]),
             w.conditions(p["gpu"]) or "not recorded",
             w.conditions(p["cpu"]) or "not recorded"]
            for _, p in pairs.sort_values(["device", "model", "ratio"]).iterrows()]
    table = Table(["device", "model", "OpenCL run", "OpenCL iteration (ms, host clock)",
                   "CPU iteration (ms)", "OpenCL / CPU time", "verdict",
                   "OpenCL run's conditions", "CPU run's conditions"], rows)
    refs = _ref(sorted(set(pairs["run_id"]) | set(pairs["cpu_run_id"])))
    return Finding("gpu_vs_cpu", title, stmt, refs, paper, table)


def size_trend(runs: pd.DataFrame) -> Finding:
    """Takes runs.parquet. Per device, whether the best GPU/CPU iteration-time ratio shrinks
    as the model grows (``flops_per_iteration``), comparing that device's smallest and
    largest model; a device needs two such models. Ratios of different devices are never
    compared. Set beside ``ANCHORS["gpu_slowdown"]`` (the ratio shrinking with network
    size)."""
    title, paper = "GPU/CPU ratio vs model size", [ANCHORS["gpu_slowdown"]]
    pairs = gpu_cpu_pairs(runs)
    usable = [p["gpu"]["status"] == "ok" and p["cpu"]["status"] == "ok"
              for _, p in pairs.iterrows()]
    best = best_pairs(pairs[usable] if len(pairs) else pairs)
    flops = _measured(runs).set_index("run_id")["flops_per_iteration"]
    best = best.assign(flops=best["run_id"].map(flops)).dropna(subset=["flops"])
    trends, rows, refs = [], [], []
    for dev, b in best.groupby("device"):
        b = b.sort_values("flops")
        rows += [[dev, m, f"{f / 1e6:.3g}", w.times(q, lo, hi)] for m, f, q, lo, hi in
                 zip(b["model"], b["flops"], b["ratio"], b["ratio_low"], b["ratio_high"])]
        if b["model"].nunique() < 2:
            continue
        small, large = b.iloc[0], b.iloc[-1]
        tie = (not np.isnan(small["ratio_low"]) and small["ratio_low"] <= large["ratio_high"]
               and large["ratio_low"] <= small["ratio_high"])
        trend = ("shows no clear trend (the two ratios' intervals overlap)" if tie else
                 "shrinks" if large["ratio"] < small["ratio"] else "grows")
        trends.append(f"on {dev} the ratio {trend} from {w.times(small['ratio'])} "
                      f"({small['model']}) to {w.times(large['ratio'])} ({large['model']})")
        refs += [small["run_id"], small["cpu_run_id"], large["run_id"], large["cpu_run_id"]]
    if not trends:
        return _missing("size_trend", title, "no device has two models with verified CPU "
                        "and OpenCL runs", paper)
    stmt = ("Per device, best OpenCL / CPU iteration time from its smallest to its largest "
            "model (host clock): " + "; ".join(trends) + ".")
    table = Table(["device", "model", "MFLOP / iteration", "best OpenCL / CPU time"], rows)
    return Finding("size_trend", title, stmt, _ref(sorted(set(refs))), paper, table)


# ---------------------------------------------------------------- where the time goes

def movement_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """The verified OpenCL runs with a data-movement share: runs.parquet rows with
    ``below`` (every transfer command below the timer resolution: the shares are upper
    bounds; None when not recorded) and ``gap_share`` = (``gap_ms`` -
    ``transfer_overhead_ms``) / ``iteration_median_ms``, the launch gaps outside transfer
    calls."""
    ok = _ok(runs)
    gpu = ok[~is_cpu(ok)].dropna(subset=["data_movement_share", "data_movement_call_share"])
    gpu = gpu.copy()
    gpu["below"] = [_flag(r, "transfer_below_resolution") for _, r in gpu.iterrows()]
    gpu["gap_share"] = ((gpu["gap_ms"] - gpu["transfer_overhead_ms"]).clip(lower=0)
                        / gpu["iteration_median_ms"])
    return gpu


MOVING_PLACEMENTS = ("staged", "pipelined")   # placements that move tensors every kernel


def moving(gpu: pd.DataFrame) -> pd.DataFrame:
    """The rows of :func:`movement_frame` whose placement moves data between the host and the
    device around every kernel (:data:`MOVING_PLACEMENTS`: staged with copy or map transfers,
    pipelined): the runs the paper's ~91% describes. Resident runs move only the batch and
    the loss by design."""
    return gpu[gpu["placement"].isin(MOVING_PLACEMENTS)]


def _share_clause(g: pd.DataFrame, col: str, measure: str) -> str:
    """``by <measure> X to Y (median M): it <dominates|does not dominate|dominates in k of n
    runs>``, over the runs whose transfers the timer resolved (the others' shares are upper
    bounds, counted apart in the statement)."""
    resolved = g[g["below"] != True]  # noqa: E712  (None: not recorded, counted as resolved)
    if resolved.empty:
        return f"by {measure} {w.BELOW} in every run"
    return (f"by {measure} {w.span(resolved[col], names=run_names(resolved))}: "
            f"{w.dominance(resolved[col])}")


def data_movement(runs: pd.DataFrame) -> Finding:
    """Takes runs.parquet. Per device, the share of verified OpenCL iteration time spent
    moving data, by device events (``data_movement_share``) and by call time
    (``data_movement_call_share``: the idle time inside blocking transfer calls added, what a
    host-side profiler counts; both defined in :mod:`phonetrain.results.profiling`). The
    verdict "dominates" follows each measure's median against
    :data:`~phonetrain.report.wording.DOMINANT_SHARE`; runs whose transfers were all below
    the timer resolution are shown as upper bounds and left out of the spans. Only the
    placements that move data (:func:`moving`) are set beside the paper's ~91%
    (``ANCHORS["movement_share"]``) and copies ~10-15x compute
    (``ANCHORS["copy_vs_compute"]``); resident runs are named apart."""
    title = "Data movement share of GPU training time"
    paper = [ANCHORS["movement_share"], ANCHORS["copy_vs_compute"]]
    gpu = movement_frame(runs)
    if gpu.empty:
        return _from_unstable(data_movement, runs,
                              _missing("data_movement", title, "no verified OpenCL run", paper))
    move = moving(gpu)
    parts = [f"{dev}: {_share_clause(g, 'data_movement_share', w.EVENTS)}; "
             f"{_share_clause(g, 'data_movement_call_share', w.CALLS)}"
             for dev, g in move.groupby("device")] or [
        "no verified run of a placement that moves data (staged, pipelined)"]
    resolved = move[move["below"] != True]  # noqa: E712
    ev = (resolved["data_movement_share"] > w.DOMINANT_SHARE).sum()
    call = (resolved["data_movement_call_share"] > w.DOMINANT_SHARE).sum()
    advice = (f"where it dominates by device events ({ev} run(s)), keep tensors resident on the "
              "device and move only the batch and the loss" if ev else
              f"where it dominates by call time ({call} run(s)), the cost sits in the transfer "
              "calls (driver and synchronisation), not in the bytes: fewer, batched transfers "
              "or resident tensors cut it" if call else
              "data movement is not the main cost here" if len(resolved) else
              "not compared with the paper")
    stmt = ("Share of OpenCL iteration time spent moving data in the placements that move it "
            "(staged, pipelined; paper: ~91%), " + "; ".join(parts) + f". Over all devices: "
            f"{advice}.")
    res = gpu[gpu["placement"] == "resident"]
    if len(res):
        stmt += (f" {len(res)} resident run(s) move only the batch and the loss by design and "
                 "are not set beside the paper's figure: "
                 f"{w.span(res['data_movement_share'])} ({w.EVENTS}).")
    n_below = int((gpu["below"] == True).sum())  # noqa: E712
    if n_below:
        stmt += (f" {n_below} run(s) moved data only in commands shorter than the timer "
                 "resolution: their shares are upper bounds.")
    rows = []
    for _, r in gpu.sort_values(["device", "model", "placement", "transfer", "kernel"]).iterrows():
        below = r["below"]
        resolved = below is not True and r["kernel_ms"] > 0 and _flag(
            r, "kernel_below_resolution") is not True
        rows.append([r["device"], r["model"], run_label(r, False),
                     w.pct(r["data_movement_share"], below),
                     w.pct(r["data_movement_call_share"], below), w.ms(r["transfer_ms"], below),
                     w.ms(r["kernel_ms"], _flag(r, "kernel_below_resolution")),
                     w.times(r["transfer_ms"] / r["kernel_ms"]) if resolved else "n/a"])
    table = Table(["device", "model", "run", "share (device events)", "share (call time)",
                   "transfer (ms, device events)", "kernels (ms, device events)",
                   "transfer / kernel time"], rows)
    return Finding("data_movement", title, stmt, _ref(gpu["run_id"]), paper, table)


def launch_overhead(runs: pd.DataFrame) -> Finding:
    """Takes runs.parquet. Per device, the share of verified OpenCL iteration time in launch
    gaps outside transfer calls (no command running: enqueue and dispatch cost,
    :func:`movement_frame`'s ``gap_share``, host clock). Fusing kernels is advised only where
    that share exceeds :data:`~phonetrain.report.wording.LAUNCH_GAP_SHARE`."""
    title = "Launch overhead: gaps between commands"
    gpu = movement_frame(runs).dropna(subset=["gap_share"])
    if gpu.empty:
        return _from_unstable(launch_overhead, runs,
                              _missing("launch_overhead", title, "no verified OpenCL run", []))
    parts = []
    for dev, g in gpu.groupby("device"):
        med = g["gap_share"].median()
        parts.append(f"{dev} {w.span(g['gap_share'], names=run_names(g))}" + (
            ": fewer, larger kernels (fusion) would pay" if med > w.LAUNCH_GAP_SHARE else
            ": not where the time goes"))
    stmt = ("Launch gaps outside transfer calls (no command running; host clock), share of "
            f"the median iteration, advice above {w.LAUNCH_GAP_SHARE:.0%}: "
            + "; ".join(parts) + ".")
    launches = launch_clause(gpu)
    if launches:
        stmt += " " + launches
    rows = [[r["device"], r["model"], run_label(r, False),
             w.ms(max(r["gap_ms"] - r["transfer_overhead_ms"], 0.0)), w.pct(r["gap_share"]),
             w.num(r.get("launches_per_iteration")), w.num(r.get("kernel_gap_median_us")),
             w.num(r.get("launch_overhead_us"))]
            for _, r in gpu.sort_values(["device", "model", "placement", "transfer",
                                         "kernel"]).iterrows()]
    table = Table(["device", "model", "run", "gaps outside transfer calls (ms)",
                   "share of iteration", "launches / iteration",
                   "median gap between kernels (us, device events)",
                   "gap per launch (us, host clock)"], rows)
    return Finding("launch_overhead", title, stmt, _ref(gpu["run_id"]), [], table)


def launch_clause(gpu: pd.DataFrame) -> str:
    """Per device and model (resident placement, copy transfers: the launches alone), the
    kernel launches per iteration of each kernel version with its launch cost -- the median
    idle time between consecutive kernels (``kernel_gap_median_us``, device events) and the
    iteration gap per launch (``launch_overhead_us``, host clock) -- and, where versions differ
    in launch count, whether the one with the fewest launches is faster than the one with the
    most (:func:`run_verdict`; cannot tell with its reason). Empty
    when no run has a launch count."""
    if "launches_per_iteration" not in gpu:
        return ""
    g = gpu[(gpu["placement"] == "resident") & (gpu["transfer"] == "copy")].dropna(
        subset=["launches_per_iteration"])
    parts = []
    for (dev, model), m in g.groupby(["device", "model"]):
        m = m.sort_values(["launches_per_iteration", "kernel"])
        each = ", ".join(
            f"{r['kernel']} {int(r['launches_per_iteration'])} "
            f"(gap between kernels {w.num(r['kernel_gap_median_us'])} us, "
            f"{w.num(r['launch_overhead_us'])} us per launch)" for _, r in m.iterrows())
        few, many = m.iloc[0], m.iloc[-1]
        if few["launches_per_iteration"] < many["launches_per_iteration"]:
            v = run_verdict(many, few)
            verdict = (f"{few['kernel']} {v} ({w.ms_interval(estimate(few), *interval(few))} "
                       f"vs {w.ms_interval(estimate(many), *interval(many))}, host clock)"
                       if v.stated else f"iteration time: {v}")
            each += (f"; {int(many['launches_per_iteration'] / few['launches_per_iteration'])}x"
                     f" fewer launches: {verdict}")
        parts.append(f"{dev} {model}: {each}")
    if not parts:
        return ""
    return "Kernel launches per iteration (resident, copy): " + "; ".join(parts) + "."


# ---------------------------------------------------------------- placement and transfers

def _paired(runs: pd.DataFrame, a: tuple[str, str], b: tuple[str, str]) -> list[tuple]:
    """OpenCL runs with an iteration time (``ok`` or ``unstable``) with (placement, transfer)
    ``a`` and ``b`` on the same model, device and kernel version: a list of ((model, device,
    kernel), row a, row b)."""
    ok = _measured(runs)
    key = ["model", "device", "kernel"]
    ra = ok[(ok["placement"] == a[0]) & (ok["transfer"] == a[1])].set_index(key)
    rb = ok[(ok["placement"] == b[0]) & (ok["transfer"] == b[1])].set_index(key)
    both = ra.index.intersection(rb.index)
    return [(k, ra.loc[k], rb.loc[k]) for k in both]


def pair_frame(runs: pd.DataFrame, a: tuple[str, str], b: tuple[str, str]) -> pd.DataFrame:
    """:func:`_paired` as a frame: ``device``, ``model``, ``kernel``, ``ratio`` = b / a
    iteration time (``iteration_ms``), its interval ``ratio_low``/``ratio_high``,
    ``verdict`` (:func:`run_verdict` of b against a: ``faster``
    means b is faster), ``no_difference`` (no difference stated), ``a``/``b`` (the rows)."""
    out = []
    for (model, dev, kernel), ra, rb in _paired(runs, a, b):
        lo, hi = ratio_interval(rb, ra)
        v = run_verdict(ra, rb)
        out.append({"device": dev, "model": model, "kernel": kernel,
                    "ratio": estimate(rb) / estimate(ra),
                    "ratio_low": lo, "ratio_high": hi, "verdict": v,
                    "no_difference": not v.stated, "a": ra, "b": rb})
    return pd.DataFrame(out, columns=["device", "model", "kernel", "ratio", "ratio_low",
                                      "ratio_high", "verdict", "no_difference", "a", "b"])


def _pair_clause(dev: str, g: pd.DataFrame, slower: str, faster: str) -> str:
    """``<dev> <span of the stated ratios> (<verdict>)``, then the pairs it cannot tell apart;
    a stated difference from an unstable run carries "measured under contention"."""
    clear = g[~g["no_difference"]]
    if clear.empty:
        return f"{dev}: cannot tell in {len(g)} pair(s)"
    v = (slower if (clear["ratio"] > 1).all() else faster if (clear["ratio"] < 1).all()
         else "mixed")
    n = len(g) - len(clear)
    busy = sum(x.contended for x in clear["verdict"])
    return (f"{dev}: {w.span(clear['ratio'], w.times)} ({v}"
            + (f"; {busy} pair(s) {w.UNDER_CONTENTION}" if busy else "") + ")"
            + (f", cannot tell in {n} pair(s)" if n else ""))


def _pair_verdict(r: pd.Series, what: str) -> str:
    """A pair's verdict cell: ``<what> faster``/``<what> slower`` or ``cannot tell (...)``."""
    return r["verdict"].text(f"{what} faster", f"{what} slower")


def placement(runs: pd.DataFrame) -> Finding:
    """Takes runs.parquet. Staged (the host owns the tensors) over resident placement, both
    with copy transfers: the ratio of median iteration times (host clock) per pair of the same
    model, device and kernel version, with its interval; pairs it cannot tell apart say why
    (:func:`pair_frame`)."""
    title, paper = "Placement: resident vs staged tensors", [ANCHORS["movement_share"]]
    p = pair_frame(runs, ("resident", "copy"), ("staged", "copy"))
    if p.empty:
        return _missing("placement", title, "no verified resident/copy and staged/copy pair "
                        "of the same model, device and kernel", paper)
    stmt = ("Staged over resident iteration time (host clock), the regime of frameworks that "
            "fall back to the host between operators: " + "; ".join(
                _pair_clause(d, g, "staging costs", "staging is faster")
                for d, g in p.groupby("device")) + ".")
    rows = [[r["device"], r["model"], r["kernel"],
             w.ms_interval(estimate(r["b"]), *interval(r["b"])),
             w.ms_interval(estimate(r["a"]), *interval(r["a"])),
             w.times(r["ratio"], r["ratio_low"], r["ratio_high"]),
             _pair_verdict(r, "staged")] for _, r in p.iterrows()]
    table = Table(["device", "model", "kernel", "staged (ms, host clock)", "resident (ms)",
                   "staged / resident", "verdict"], rows)
    refs = _ref(sorted({x["run_id"] for c in ("a", "b") for x in p[c]}))
    return Finding("placement", title, stmt, refs, paper, table)


def transfer_method(runs: pd.DataFrame) -> Finding:
    """Takes runs.parquet. With staged placement, map/unmap transfers
    (CL_MEM_ALLOC_HOST_PTR buffers) over read/write buffer copies: the ratio of median
    iteration times (host clock) with its interval, and of ``transfer_ms`` (device events).
    Set beside published clpeak transfer figures for phone GPUs
    (``ANCHORS["phone_transfer"]``)."""
    title, paper = "Transfers: map/unmap vs read/write copies", [ANCHORS["phone_transfer"]]
    p = pair_frame(runs, ("staged", "copy"), ("staged", "map"))
    if p.empty:
        return _missing("transfer_method", title, "no verified staged/copy and staged/map pair",
                        paper)
    stmt = ("Map/unmap over copy iteration time with staged tensors (host clock): " +
            "; ".join(_pair_clause(d, g, "copies are faster", "map/unmap is faster")
                      for d, g in p.groupby("device")) +
            ". Whether map is zero-copy is a property of the device (unified memory on "
            "phones): see the bandwidth finding.")
    rows = []
    for _, r in p.iterrows():
        a, b = r["a"], r["b"]
        below = _flag(a, "transfer_below_resolution") or _flag(b, "transfer_below_resolution")
        rows.append([r["device"], r["model"], r["kernel"],
                     w.ms_interval(estimate(b), *interval(b)),
                     w.ms_interval(estimate(a), *interval(a)),
                     w.times(r["ratio"], r["ratio_low"], r["ratio_high"]),
                     _pair_verdict(r, "map"),
                     f"{w.ms(b['transfer_ms'], _flag(b, 'transfer_below_resolution'))} vs "
                     f"{w.ms(a['transfer_ms'], _flag(a, 'transfer_below_resolution'))}"
                     + (" (not comparable)" if below else "")])
    table = Table(["device", "model", "kernel", "map (ms, host clock)", "copy (ms)",
                   "map / copy", "verdict", "transfer ms, map vs copy (device events)"], rows)
    refs = _ref(sorted({x["run_id"] for c in ("a", "b") for x in p[c]}))
    return Finding("transfer_method", title, stmt, refs, paper, table)


def pipelining(runs: pd.DataFrame) -> Finding:
    """Takes runs.parquet. Pipelined placement (staged transfers on a second queue,
    overlapping the kernels) over staged, both with copy transfers: the ratio of median
    iteration times (host clock) per pair of the same model, device and kernel version, and
    for the pipelined run its kernel and data-movement medians (device events), their sum
    (what one in-order queue costs at best) and their maximum (the bound perfect overlap
    reaches), and ``transfer_kernel_overlap_ms``: "no overlap measured" when it stays below
    :data:`~phonetrain.report.wording.OVERLAP_MIN_SHARE` of the data movement (e.g. a device
    whose queues run one after the other). The statement adds the most perfect overlap could
    save, ``min(kernel, transfer) / (kernel + transfer)``, over runs whose times are above
    the timer resolution."""
    title, paper = "Pipelining: transfers overlapped with kernels vs staged", []
    p = pair_frame(runs, ("staged", "copy"), ("pipelined", "copy"))
    if p.empty:
        return _missing("pipelining", title, "no verified staged/copy and pipelined/copy pair "
                        "of the same model, device and kernel", paper)
    rows, clauses, savings = [], [], []
    for _, r in p.iterrows():
        b = r["b"]
        below = _flag(b, "transfer_below_resolution") or _flag(b, "kernel_below_resolution")
        k, t = float(b["kernel_ms"]), float(b["transfer_ms"])
        seen = w.overlap_measured(b["transfer_kernel_overlap_ms"], t, b["timer_resolution_ns"])
        rows.append([r["device"], r["model"], r["kernel"],
                     w.ms_interval(estimate(r["a"]), *interval(r["a"])),
                     w.ms_interval(estimate(b), *interval(b)),
                     w.times(r["ratio"], r["ratio_low"], r["ratio_high"]),
                     _pair_verdict(r, "pipelined"),
                     f"{w.ms(max(k, t), below)} / {w.ms(k + t, below)}",
                     w.overlap_text(b["transfer_kernel_overlap_ms"], t,
                                    b["timer_resolution_ns"])])
        clauses.append((r["device"], seen))
        if not below and k + t > 0:
            savings.append(min(k, t) / (k + t))
    seen_by_dev = {d: [s for dd, s in clauses if dd == d] for d in p["device"].unique()}
    overlap = "; ".join(
        f"{d}: " + (f"overlap measured in {sum(v)} of {len(v)} run(s)" if any(v) else
                    f"no overlap measured (below {w.OVERLAP_MIN_SHARE:.0%} of the data movement "
                    "in every run)")
        for d, v in seen_by_dev.items())
    stmt = ("Pipelined over staged iteration time (host clock): " + "; ".join(
        _pair_clause(d, g, "pipelining costs", "pipelining is faster")
        for d, g in p.groupby("device")) + f". Transfer/kernel overlap (device events): "
        f"{overlap}." + (f" Perfect overlap, max(kernel, transfer) instead of their sum, would "
                         f"save at most {w.span(savings)} of it." if savings else ""))
    table = Table(["device", "model", "kernel", "staged (ms, host clock)",
                   "pipelined (ms, host clock)", "pipelined / staged", "verdict",
                   "max(kernel, transfer) / sum, pipelined (device events)",
                   "overlap (device events)"], rows)
    refs = _ref(sorted({x["run_id"] for c in ("a", "b") for x in p[c]}))
    return Finding("pipelining", title, stmt, refs, paper, table)


# ---------------------------------------------------------------- GEMM

def gemm_throughput(runs: pd.DataFrame, commands: pd.DataFrame) -> Finding:
    """Takes runs.parquet and commands.parquet. Per device, the best GEMM throughput inside
    training (``gemm_gflops`` of :func:`~phonetrain.report.analysis.gemm_table`: GEMM FLOPs of
    an iteration over their median device-event time, 1e9 FLOP/s) on the CPU backend and on
    OpenCL, and their ratio, beside the paper's GEMM and CPU GFLOPS (``ANCHORS``
    gpu_gemm_before, gpu_gemm_after, gpu_opt_abstract, cpu_gflops)."""
    title = "GEMM throughput: GPU kernels vs CPU"
    paper = [ANCHORS["gpu_gemm_before"], ANCHORS["gpu_gemm_after"],
             ANCHORS["gpu_opt_abstract"], ANCHORS["cpu_gflops"]]
    g = gemm_table(runs, commands)
    if g.empty:
        return _missing("gemm_throughput", title, "no verified run with GEMM kernels", paper)
    g = g.reset_index()
    parts, refs = [], []
    for dev, d in g.groupby("device"):
        best = {}
        for name, sub in (("CPU", d[is_cpu(d)]), ("OpenCL", d[~is_cpu(d)])):
            if len(sub):
                best[name] = sub.loc[sub["gemm_gflops"].idxmax()]
                refs.append(best[name]["run_id"])
        s = f"{dev}: " + ", ".join(f"best {n} {b['gemm_gflops']:.3g} GFLOPS ({b['model']}, "
                                   f"{run_label(b, False)})" for n, b in best.items())
        if len(best) == 2:
            s += (f", OpenCL / CPU {best['OpenCL']['gemm_gflops'] / best['CPU']['gemm_gflops']:.3g}"
                  "x")
        parts.append(s)
    stmt = ("GEMM inside training (GEMM FLOPs over their device-event time; paper: optimized GPU "
            "GEMM 25-70 vs CPU 15-30 GFLOPS): " + "; ".join(parts) + ".")
    rows = [[r["device"], r["model"], run_label(r, False), f"{r['gemm_gflops']:.3g}"]
            for _, r in g.sort_values(["device", "model", "gemm_gflops"],
                                      ascending=[True, True, False]).iterrows()]
    table = Table(["device", "model", "run", "GEMM GFLOPS (device events)"], rows)
    return Finding("gemm_throughput", title, stmt, _ref(refs), paper, table)


GEMM_CONDITIONS = ("load_avg_1m", "other_cpu_share", "omp_wait_policy", "cpu_mhz_start",
                   "cpu_mhz_end", "temperature_c_start", "temperature_c_end")


def gemm_side(r: pd.Series | dict) -> w.Side:
    """One GEMM row as a side of a comparison of kernel times: ``median_ms`` with its
    interval ``low_ms``..``high_ms`` (null until the runner records one: then no verdict),
    its status and the conditions the row records (none in older tables)."""
    g = r.get
    reason = g("status_reason")
    return w.Side(_float(g("median_ms")), _float(g("low_ms")), _float(g("high_ms")),
                  status=str(g("status")), reason="" if reason is None or pd.isna(reason)
                  else str(reason), conditions=w.conditions(r))


def _float(x) -> float:
    """``x`` as a float, nan for null."""
    return float("nan") if x is None or pd.isna(x) else float(x)


def gemm_conditions(r: pd.Series | dict) -> str:
    """The measurement conditions a GEMM row records, or ``not recorded``."""
    return w.conditions({k: r.get(k) for k in GEMM_CONDITIONS}) or "not recorded"


def optimization_gain(gemm: pd.DataFrame) -> pd.DataFrame:
    """Per device and GEMM shape of the verified sweep
    (:func:`~phonetrain.report.analysis.gemm_sweep`): ``own`` (the best GFLOPS of the
    project's optimized versions, :data:`~phonetrain.report.analysis.OWN_KERNELS`),
    ``own_kernel`` (which), ``baseline``, ``clblast`` and ``cpu`` GFLOPS where measured,
    ``gain`` = own / baseline (the same FLOPs, so baseline time / optimized time), its
    interval ``gain_low``/``gain_high`` from the two rows' kernel-time intervals (baseline
    low / optimized high .. baseline high / optimized low; nan where either row records
    none), ``verdict`` (:func:`~phonetrain.report.wording.judge` of the optimized kernel time
    against the baseline's: ``faster`` means the optimized version is) and ``conditions``
    (both rows'). Empty when no device has baseline and an optimized version."""
    g = gemm_sweep(gemm)
    out = []
    for (dev, shape), d in g.groupby(["device", "shape"]):
        own = d[d["kernel"].isin(OWN_KERNELS)]
        base = d[d["kernel"] == "baseline"]
        if own.empty or base.empty:
            continue
        o, b = own.loc[own["gflops"].idxmax()], base.loc[base["gflops"].idxmax()]
        best = {k: d.loc[d["kernel"] == k, "gflops"].max() for k in ("clblast", CPU_KERNEL)}
        so, sb = gemm_side(o), gemm_side(b)
        lo = sb.low / so.high if so.has_interval and sb.has_interval else np.nan
        hi = sb.high / so.low if so.has_interval and sb.has_interval else np.nan
        out.append({"device": dev, "shape": shape, "own": o["gflops"],
                    "own_kernel": o["kernel"], "baseline": b["gflops"],
                    "clblast": best["clblast"], "cpu": best[CPU_KERNEL],
                    "gain": o["gflops"] / b["gflops"], "gain_low": lo, "gain_high": hi,
                    "verdict": w.judge(sb, so),
                    "conditions": f"{gemm_conditions(o)} / {gemm_conditions(b)}"})
    return pd.DataFrame(out, columns=["device", "shape", "own", "own_kernel", "baseline",
                                      "clblast", "cpu", "gain", "gain_low", "gain_high",
                                      "verdict", "conditions"])


def _verdict_counts(verdicts) -> str:
    """``faster in 3, cannot tell in 2 (no interval recorded)`` over :class:`Verdict` s."""
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[str(v)] = counts.get(str(v), 0) + 1
    return ", ".join(f"{k} in {n}" for k, n in sorted(counts.items()))


def kernel_optimization(gemm: pd.DataFrame, peaks: pd.DataFrame) -> Finding:
    """Takes gemm.parquet and peaks.parquet. Per device: the best GFLOPS of the optimized
    versions at their best shape, with baseline, CLBlast and the CPU backend at that same
    shape, and the best as a share of the device's measured compute peak
    (:func:`~phonetrain.report.analysis.peak_share`); then, labelled as such, the median over
    shapes of the per-shape ratios (a typical shape, not the best result), and per shape the
    ratio's interval from the two rows' kernel-time intervals with its verdict
    (:func:`optimization_gain`; cannot tell where a row records no interval). Set beside the
    paper's 5-15 -> 25-70 GFLOPS (second-hand, ``ANCHORS["gpu_gemm_gain"]``)."""
    title = "Kernel optimization: GEMM GFLOPS per version"
    paper = [ANCHORS["gpu_gemm_before"], ANCHORS["gpu_gemm_after"], ANCHORS["gpu_gemm_gain"],
             ANCHORS["cpu_gflops"]]
    gain = optimization_gain(gemm)
    if gain.empty:
        return _missing("kernel_optimization", title,
                        "no verified GEMM sweep with baseline and an optimized version", paper)
    parts, rows, refs = [], [], []
    for dev, d in gain.groupby("device"):
        b = d.loc[d["own"].idxmax()]
        at = ", ".join(f"{n} {b[c]:.3g}" for c, n in (("baseline", "baseline"),
                                                       ("clblast", "CLBlast"),
                                                       ("cpu", "CPU backend"))
                       if pd.notna(b[c]))
        s = (f"{dev}: best {b['own_kernel']} {b['own']:.3g} GFLOPS at {b['shape']} "
             f"(same shape: {at})")
        pk, pk_name = compute_peak(peaks, dev)
        if pk == pk:
            s += ", " + peak_share(b["own"], pk, pk_name)
        meds = [f"{(d['own'] / d[c]).median():.2g}x {n}" for c, n in
                (("baseline", "baseline"), ("clblast", "CLBlast"), ("cpu", "the CPU backend"))
                if d[c].notna().any()]
        s += f"; median over {len(d)} shapes of the per-shape ratio: " + ", ".join(meds)
        s += "; per shape, optimized vs baseline kernel time: " + _verdict_counts(d["verdict"])
        parts.append(s)
        rows += [[dev, r["shape"], f"{r['own']:.3g} ({r['own_kernel']})",
                  *(w.num(r[c]) for c in ("baseline", "clblast", "cpu")),
                  w.times(r["gain"], r["gain_low"], r["gain_high"]),
                  r["verdict"].text("optimized faster", "optimized slower"), r["conditions"]]
                 for _, r in d.iterrows()]
        refs.append(f"gemm.parquet: device={dev}")
    stmt = ("Optimized GEMM kernels (GEMM sweep, GFLOPS, median of repeats; paper: 5-15 -> "
            "25-70 GFLOPS, 4-5x, second-hand): " + "; ".join(parts) + ".")
    table = Table(["device", "shape", "best optimized GFLOPS", "baseline", "CLBlast",
                   "CPU backend", "optimized / baseline [interval]", "verdict",
                   "conditions (optimized / baseline)"], rows)
    return Finding("kernel_optimization", title, stmt, refs, paper, table)


# ---------------------------------------------------------------- bandwidth

def _behaviour(c: pd.Series) -> str:
    """How a transfer kind's time behaves, in words, from a row of
    :func:`~phonetrain.report.analysis.transfer_time_classes`."""
    if c["cls"] == "zero-copy":
        return (f"zero-copy: ~{c['call_us']:.3g} us per call up to {c['max_bytes']} bytes, "
                f"where a copy at {c['reference_gbps']:.3g} GB/s would have grown by "
                f"{c['copy_growth_us']:.3g} us")
    if c["cls"] == "overhead-bound":
        return (f"inside the call overhead: ~{c['call_us']:.3g} us per call up to "
                f"{c['max_bytes']} bytes, where a copy at the measured "
                f"{c['reference_gbps']:.3g} GB/s takes only {c['copy_growth_us']:.3g} us more; "
                "not zero-copy, the sweep ends before the bytes show")
    if c["cls"] == "undetermined":
        return (f"flat at ~{c['call_us']:.3g} us per call up to {c['max_bytes']} bytes; no "
                "measured bandwidth to tell zero-copy from call overhead")
    return "grows with size (a copy)"


def _gbps_interval(r: pd.Series) -> str:
    """A bandwidth row's host-timed GB/s with its interval, ``12.3 GB/s [11.9-12.6]``, or
    ``12.3 GB/s (no interval recorded)``."""
    lo, hi = r.get("host_gbps_low"), r.get("host_gbps_high")
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return f"{r['host_gbps']:.3g} GB/s (no interval recorded)"
    return f"{r['host_gbps']:.3g} GB/s [{float(lo):.3g}-{float(hi):.3g}]"


def bandwidth(bw: pd.DataFrame, peaks: pd.DataFrame | None = None) -> Finding:
    """Takes bandwidth.parquet and peaks.parquet. Per device and transfer kind: how its time
    behaves with size (:func:`~phonetrain.report.analysis.transfer_time_classes`: zero-copy
    only where a copy at the device's measured bandwidth would have grown), the peak
    host-timed GB/s (1e9 B/s) of kinds that copy, and the share of it the smallest transfer
    reaches (host clock: what a training step pays, call overhead included). Set beside
    published clpeak transfer figures for phone GPUs (``ANCHORS["phone_transfer"]``)."""
    title, paper = "Host <-> device bandwidth", [ANCHORS["phone_transfer"]]
    bw = bw.dropna(subset=["host_gbps"])
    if bw.empty:
        return _missing("bandwidth", title, "no bandwidth sweep", paper)
    cls = transfer_time_classes(bw, peaks).set_index(["device", "kind"])
    rows, flat, peak_text, fracs = [], {}, [], []
    for (dev, kind), g in bw.groupby(["device", "kind"]):
        c = cls.loc[(dev, kind)]
        if c["cls"] != "copy":
            flat.setdefault(c["cls"], []).append(f"{dev} {kind} ~{c['call_us']:.3g} us")
            rows.append([dev, kind, _behaviour(c), "n/a", "n/a", "n/a"])
            continue
        pk = g.loc[g["host_gbps"].idxmax()]
        frac = g.loc[g["size_bytes"].idxmin(), "host_gbps"] / pk["host_gbps"]
        fracs.append(frac)
        peak_text.append(f"{dev} {kind} {_gbps_interval(pk)}")
        rows.append([dev, kind, _behaviour(c),
                     f"{_gbps_interval(pk)} ({w.num(pk['device_gbps'])})",
                     str(int(pk["size_bytes"])), w.pct(frac)])
    sentences = []
    if peak_text:
        med = float(np.median(fracs))
        sentences.append(
            "Peak host-timed bandwidth: " + ", ".join(peak_text) +
            f"; the smallest transfers reach a median {w.pct(med)} of their kind's peak" +
            (": per-call overhead dominates small tensors, so fewer, larger transfers pay off."
             if med < w.SMALL_TRANSFER_EFFICIENCY else "."))
    words = {"zero-copy": "Zero-copy (flat where a copy at the measured bandwidth would have "
                          "grown)",
             "overhead-bound": "inside the call overhead, not zero-copy (a copy at the "
                               "measured bandwidth would not have grown beyond it over the "
                               "sweep)",
             "undetermined": "flat, but no measured bandwidth to tell zero-copy from overhead"}
    if flat:
        sentences.append("; ".join(f"{words[k]}: {', '.join(v)} per call"
                                   for k, v in flat.items()) + ".")
    stmt = " ".join(sentences)
    table = Table(["device", "kind", "time vs size",
                   "peak host clock [interval] (GB/s, device events)",
                   "at bytes", "smallest transfer's share of peak"], rows)
    refs = [f"bandwidth.parquet: {d}/{k}" for d, k in cls.index]
    return Finding("bandwidth", title, stmt, refs, paper, table)


# ---------------------------------------------------------------- all of them

def unstable_runs(runs: pd.DataFrame) -> list[dict[str, str]]:
    """Takes runs.parquet; returns the ``unstable`` runs (ran and verified, but measured under
    contention: the host ran slower than its quiet figure), one dict each: ``run_id``, ``reason``
    (``status_reason``), ``iteration`` (median with its interval, for the record only) and
    ``conditions`` (:func:`~phonetrain.report.wording.conditions`). They give no figure of
    their own to a guideline and enter its comparisons only as
    :func:`~phonetrain.report.wording.judge` allows."""
    u = runs[runs["status"] == "unstable"]
    return [{"run_id": r["run_id"], "reason": "" if pd.isna(r["status_reason"]) else
             str(r["status_reason"]),
             "iteration": w.ms_interval(estimate(r), *interval(r)),
             "conditions": w.conditions(r)} for _, r in u.sort_values("run_id").iterrows()]


def all_findings(tables: dict[str, pd.DataFrame]) -> list[Finding]:
    """Takes the tables of :func:`phonetrain.report.build.load_tables` (runs, commands, gemm,
    peaks, bandwidth used); returns every guideline's :class:`Finding`, in report order."""
    runs, commands = tables["runs"], tables["commands"]
    return [gpu_vs_cpu(runs), size_trend(runs), data_movement(runs), launch_overhead(runs),
            placement(runs), pipelining(runs), transfer_method(runs),
            gemm_throughput(runs, commands),
            kernel_optimization(tables["gemm"], tables["peaks"]),
            bandwidth(tables["bandwidth"], tables["peaks"]), batch_size(runs), memory(runs),
            accuracy_first(runs, tables["iterations"]), energy(runs)]


def _accuracy_sentence(dev: str, model: str, g: pd.DataFrame) -> str:
    """One sentence on one device and model from its :func:`time_to_accuracy` rows: who
    reached the highest accuracy first (several named together on a tie in time), when the
    others did, and each one's accuracy at equal wall time."""
    first = g.iloc[0]
    secs = lambda ms: f"{w.num(ms / 1e3)} s"  # noqa: E731
    if len(g) == 1:
        return (f"{dev}, {model}: only {first['label']} evaluated (verified runs); its highest "
                f"held-out accuracy was {w.pct(first['target'])}, after "
                f"{secs(first['reached_target_ms'])}.")
    tied = g[g["reached_target_ms"] == first["reached_target_ms"]]
    who = " and ".join(tied["label"])
    head = (f"{dev}, {model}: {who} reached the highest held-out accuracy, "
            f"{w.pct(first['target'])}, " + ("first" if len(tied) == 1 else "at the same time")
            + f", after {secs(first['reached_target_ms'])}")
    others = g.iloc[len(tied):]
    reached = others[others["reached_target_ms"].notna()]
    tail = (f"; {', '.join(reached['label'])} reached it later "
            f"({', '.join(secs(t) for t in reached['reached_target_ms'])})"
            if len(reached) else "; no other configuration reached it" if len(others) else "")
    at = g.sort_values("accuracy_at_common", ascending=False, na_position="last")
    acc = lambda a: "no evaluation yet" if pd.isna(a) else w.pct(a)  # noqa: E731
    same = at["accuracy_at_common"].nunique(dropna=False) == 1
    common = (f"at equal wall time ({secs(first['common_ms'])}) "
              + (f"all had {acc(at['accuracy_at_common'].iloc[0])}" if same else
                 ", ".join(f"{r['label']} {acc(r['accuracy_at_common'])}"
                           for _, r in at.iterrows())))
    return head + tail + "; " + common + "."


def accuracy_first(runs: pd.DataFrame, iterations: pd.DataFrame) -> Finding:
    """Which configuration reached the highest held-out accuracy first, per device and model,
    and the accuracy each had at equal wall time (the shortest run's last evaluation); from
    :func:`~phonetrain.report.analysis.time_to_accuracy` (verified runs with
    ``measure.eval_every`` > 0; wall time by host clock, warm-up included)."""
    title = "Time to accuracy: which configuration reaches it first"
    t = time_to_accuracy(runs, iterations)
    if t.empty:
        return Finding("accuracy_first", title, "Not measured: no verified run evaluated on a "
                       "held-out split; set measure.eval_every (e.g. measure.eval_every=10) "
                       "to record held-out accuracy.", measured=False)
    sentences = [_accuracy_sentence(dev, model, g)
                 for (dev, model), g in t.groupby(["device", "model"], sort=True)]
    rows = [[r["device"], r["model"], r["label"], w.pct(r["best_accuracy"]),
             w.num(r["best_at_ms"] / 1e3), w.num(r["reached_target_ms"] / 1e3),
             w.num(r["common_ms"] / 1e3), w.pct(r["accuracy_at_common"])]
            for _, r in t.iterrows()]
    statement = (" ".join(sentences) + " Wall time is the runner's iteration times summed "
                 "(host clock, warm-up included); held-out accuracy is computed from each "
                 "run's own parameters.")
    return Finding("accuracy_first", title, statement, rows=_ref(t["run_id"]),
                   table=Table(["device", "model", "run", "best held-out accuracy",
                                "reached at (s)", "reached the highest of all at (s)",
                                "equal wall time (s)", "accuracy then"], rows))


def batch_size(runs: pd.DataFrame) -> Finding:
    """The largest batch that fits per device, model and backend (status ``ok`` vs ``oom``
    over ``sweep.batches``; :func:`~phonetrain.report.analysis.largest_batch`), and how the
    iteration time per sample (host clock) and the OpenCL buffers change from the smallest to
    the largest batch that ran. Only series with two or more batch sizes."""
    s = batch_scaling(runs)
    if not s.empty:
        s = s[s.groupby(BATCH_KEY, dropna=False)["batch_size"].transform("nunique") >= 2]
    title = "Batch size: the largest that fits, and time per sample"
    if s.empty:
        return Finding("batch_size", title, "Not measured: no model ran at two or more batch "
                       "sizes (set sweep.batches, e.g. [8, 16, 32, 64]).", measured=False)
    lim = largest_batch(runs.merge(s[["device", "model", "backend", "placement", "transfer",
                                      "kernel"]].drop_duplicates()))
    rows = []
    for _, L in lim.iterrows():
        g = s[(s[BATCH_KEY].fillna("none") == L[BATCH_KEY].values).all(axis=1)]
        ok = g[g["status"] == "ok"]
        first, last = (ok.iloc[0], ok.iloc[-1]) if len(ok) else (None, None)
        per = (f"{w.num(first['ms_per_sample'], '.3g')} -> {w.num(last['ms_per_sample'], '.3g')}"
               if first is not None else "none ran")
        rows.append([L["device"], L["model"], run_label(L, False), str(int(L["batches"])),
                     "none" if pd.isna(L["largest_ok"]) else str(int(L["largest_ok"])),
                     "none" if pd.isna(L["smallest_oom"]) else str(int(L["smallest_oom"])),
                     per, w.num(last["device_buffer_mib"], ".3g") if first is not None else ""])
    ids = runs.merge(s[BATCH_KEY + ["batch_size"]], on=BATCH_KEY + ["batch_size"])["run_id"]
    n_oom = int(lim["smallest_oom"].notna().sum())
    statement = (f"{len(lim)} model/backend series ran at two or more batch sizes; "
                 f"{n_oom} ran out of device memory at some size (largest that fits per series "
                 "in the table). Time per sample is the median iteration time (host clock) "
                 "divided by the batch size.")
    return Finding("batch_size", title, statement, rows=_ref(sorted(set(ids))),
                   table=Table(["device", "model", "backend", "batch sizes run",
                                "largest that fits", "smallest out of memory",
                                "ms per sample, smallest -> largest batch that ran",
                                "OpenCL buffers MiB at the largest"], rows))


def _memory_sentence(dev: str, model: str, g: pd.DataFrame) -> str:
    """One clause on one device and model from its :func:`memory_frame` rows: the role that
    takes the most bytes at the largest batch (the largest lowering there), with its bytes,
    the total and its share; "it dominates" above
    :data:`~phonetrain.report.wording.DOMINANT_SHARE`, else "under half"."""
    r = g[g["batch_size"] == g["batch_size"].max()].iloc[0]
    verdict = ("it dominates" if w.dominates(r["dominant_share"]) == "dominates" else
               "under half")
    top = next(c for c, lab in MEMORY_ROLES if lab == r["dominant"])
    return (f"{dev}, {model} (batch {int(r['batch_size'])}, {r['variant']}): largest role "
            f"{r['dominant']}, {w.size(r[top])} of {w.size(r['plan_tensor_bytes'])} "
            f"({w.pct(r['dominant_share'])}: {verdict})")


def _fit_sentence(m: pd.DataFrame, dev: str, model: str) -> str | None:
    """Where ``model`` ran at two or more batch sizes on ``dev``: the largest batch that fit
    (ran to the end in every configuration that shares its plan: ``ran`` and not ``oom`` of
    :func:`memory_frame`) with its plan bytes, and the smallest
    that ran out of device memory (``oom``) with its bytes; None without a sweep."""
    g = m[(m["device"] == dev) & (m["model"] == model)]
    if g["batch_size"].nunique() < 2:
        return None
    fit, oom = g[g["ran"] & ~g["oom"]], g[g["oom"]]
    head = (f"{dev}, {model}: the largest batch that fit is {int(fit['batch_size'].max())} "
            f"({w.size(fit.loc[fit['batch_size'].idxmax(), 'plan_tensor_bytes'])} of tensors)"
            if len(fit) else f"{dev}, {model}: no batch fit")
    if not len(oom):
        return head + f", all {g['batch_size'].nunique()} batch sizes fit"
    o = oom.loc[oom["batch_size"].idxmin()]
    return head + (f"; batch {int(o['batch_size'])} ran out of device memory "
                   f"({w.size(o['plan_tensor_bytes'])})")


def memory(runs: pd.DataFrame) -> Finding:
    """Which memory role takes the most of a training step's tensors, per device and model
    (:func:`~phonetrain.report.analysis.memory_frame`: bytes of the plan's tensors by role,
    phonetrain.results.memory), and, where a model ran at two or more batch sizes
    (``sweep.batches``; runs with status ``oom`` did not fit), the largest batch that fit per
    device with its bytes. It is built from verified runs -- ``ok`` and also ``unstable``:
    the bytes are the plan's and do not depend on the timing -- and the batches that did not
    fit (``oom``) only; a run that failed verification never counts."""
    title = "Memory: which role dominates a training step's tensors"
    m = memory_frame(runs[runs["status"].isin(["ok", "unstable", "oom"])])
    if m.empty:
        return _missing("memory", title, "no verified run has memory by role (the aggregate "
                        "reads it from each run folder's plan.json; re-aggregate)", [])
    pairs = list(m.groupby(["device", "model"], sort=True))
    lead = "; ".join(_memory_sentence(dev, model, g) for (dev, model), g in pairs) + "."
    fits = [s for s in (_fit_sentence(m, dev, model) for (dev, model), _ in pairs) if s]
    tail = (" Batch sweep: " + "; ".join(fits) + "." if fits else " No batch sweep: set "
            "sweep.batches (e.g. [16, 32, 64]) to find the largest batch that fits.")
    rows = [[r["device"], r["model"], str(int(r["batch_size"])), r["variant"],
             w.size(r["plan_tensor_bytes"]), *[w.size(r[c]) for c, _ in MEMORY_ROLES],
             f"{r['dominant']} {w.pct(r['dominant_share'])}",
             "yes" if r["oom"] else "no"] for _, r in m.iterrows()]
    note = (" Bytes are the plan's tensors (numel x 4); the runner allocates each once on the "
            "host and, on OpenCL, once as a device buffer.")
    return Finding("memory", title, lead + tail + note,
                   rows=_ref(sorted({i for ids in m["run_ids"] for i in ids})),
                   table=Table(["device", "model", "batch", "configurations", "total",
                                *[lab for _, lab in MEMORY_ROLES], "largest role",
                                "out of memory"], rows))


def _energy_sentence(dev: str, model: str, g: pd.DataFrame) -> str:
    """One sentence on one device and model from its :func:`energy_frame` rows (least
    energy first): the least energy per iteration and its mean power (and the runs within its
    uncertainty: :func:`energy_differs`), and how the fastest (or, when that is the same run,
    the costliest) configuration compares."""
    least = g.iloc[0]
    head = (f"{dev}, {model}: {least['label']} used the least energy per training iteration, "
            f"{w.num(least['energy_per_iteration_mj'])} mJ at "
            f"{w.num(least['mean_power_w'])} W mean power")
    if len(g) == 1:
        return head + " (the only configuration measured)."
    tied = [r["label"] for _, r in g.iloc[1:].iterrows() if not energy_differs(least, r)]
    if tied:
        head += f" (tied within the uncertainty with {', '.join(tied)})"
    fastest = g.loc[g["iteration_median_ms"].idxmin()]
    other, role = ((g.iloc[-1], "the costliest") if fastest["run_id"] == least["run_id"]
                   else (fastest, "the fastest"))
    ratio = other["energy_per_iteration_mj"] / least["energy_per_iteration_mj"]
    same = "" if energy_differs(least, other) else ", within the uncertainty"
    also = "; it was also the fastest" if role == "the costliest" else ""
    return (head + f"{also}; {role}, {other['label']}, used "
            f"{w.num(other['energy_per_iteration_mj'])} mJ ({w.times(ratio)} the least{same}) "
            f"at {w.num(other['mean_power_w'])} W.")


def _energy_gap_sentences(runs: pd.DataFrame, measured: set[str]) -> list[str]:
    """Per device, why verified runs have no energy figure
    (:func:`~phonetrain.report.analysis.energy_gaps`): "Not measured on <device> (<why>)."
    for a device without any, else how many of its runs lack one and why."""
    out = []
    for dev, g in energy_gaps(runs).groupby("device", sort=True):
        for why, h in g.groupby("why", sort=True):
            out.append(f"Not measured on {dev} ({why})." if dev not in measured else
                       f"{len(h)} more verified run(s) on {dev} have no energy figure ({why}).")
    return out


def energy(runs: pd.DataFrame) -> Finding:
    """Energy per training iteration per device and model, from the runner's battery power
    sampler (:func:`~phonetrain.report.analysis.energy_frame`; verified runs only): which
    configuration costs the least energy, how the fastest compares (energy = mean power x
    time, so a faster run at higher power can cost more), the devices where energy was not
    measured, and the runs whose clocks dropped while they were measured (``throttled``)."""
    title = "Energy per iteration: which configuration costs the least"
    e = energy_frame(runs)
    gaps = _energy_gap_sentences(runs, set(e["device"]))
    if e.empty:
        return Finding("energy", title, " ".join(gaps) or "Not measured: no verified run.",
                       measured=False)
    sentences = [_energy_sentence(dev, model, g)
                 for (dev, model), g in e.groupby(["device", "model"], sort=True)] + gaps
    hot = e.loc[e["throttled"].fillna(False).astype(bool), "run_id"]
    if len(hot):
        sentences.append("Throttled while measured (a sampled clock dropped; their time and "
                         f"energy are at lower clocks): {', '.join(hot)}.")
    flags = {True: "yes", False: "no"}
    rows = [[r["device"], r["model"], r["label"],
             f"{w.num(r['energy_per_iteration_mj'], '.4g')} +- "
             f"{w.num(r['energy_uncertainty_mj'], '.2g')}",
             w.num(r["energy_per_sample_mj"]), w.num(r["mean_power_w"]),
             w.num(r["iteration_median_ms"]), w.num(r["power_sample_hz"], ".0f"),
             flags.get(_flag(r, "throttled"), "not known")] for _, r in e.iterrows()]
    return Finding("energy", title, " ".join(sentences), rows=_ref(e["run_id"]),
                   table=Table(["device", "model", "run", "energy per iteration (mJ, +- SE)",
                                "energy per sample (mJ)", "mean power (W)",
                                "median iteration (ms, host clock)", "sampling (Hz)",
                                "throttled"], rows))
