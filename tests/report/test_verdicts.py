"""Verdicts follow numbers: hand-made tables through every guideline and the at-a-glance table,
each verdict checked on both sides of the threshold its number crosses, the measure named,
the estimate's own interval (never the IQR) deciding, unstable runs never giving a verdict
their noise could spoil, sub-resolution sums never printed as a bare 0."""

from __future__ import annotations

import math

import pandas as pd

import pytest

from phonetrain.report import findings as fd
from phonetrain.report import glance, wording
from phonetrain.results import schema


ESTIMATOR = "median of the measured iterations, test interval"


def run(run_id, med, *, device="d", model="m", placement=None, transfer=None, kernel=None,
        iqr=0.05, ci=None, status="ok", **kw):
    """One runs.parquet row: median and estimate ``med`` ms, IQR +-``iqr`` x med; the
    estimate's interval ``ci`` (lo, hi), else the IQR's ends."""
    row = {"run_id": f"{device}/{run_id}", "model": model, "device": device,
           "backend": "cpu" if placement is None else "opencl", "placement": placement,
           "transfer": transfer, "kernel": kernel, "status": status, "config_hash": "c",
           "git_rev": "g", "iteration_median_ms": med, "iteration_p25_ms": med * (1 - iqr),
           "iteration_p75_ms": med * (1 + iqr), "device_type": None if placement is None
           else "gpu", "device_name": "gpu0", "gap_ms": 0.0, "transfer_overhead_ms": 0.0,
           "transfer_ms": 0.0, "kernel_ms": med / 2}
    if ci:
        row["iteration_ci_low_ms"], row["iteration_ci_high_ms"] = ci
    lo, hi = ci or (med * (1 - iqr), med * (1 + iqr))
    row.update(iteration_ms=med, iteration_low_ms=lo, iteration_high_ms=hi,
               iteration_estimator=ESTIMATOR)
    row.update(kw)
    return row


def table(*rows) -> pd.DataFrame:
    return schema.frame(list(rows), "runs")


def cell(f: fd.Finding, col: str, row: int = 0) -> str:
    return f.table.rows[row][f.table.columns.index(col)]


@pytest.mark.parametrize("gpu_ms, verdict, advice", [(8.0, "GPU faster", "use the GPU"),
                                                     (12.0, "GPU slower", "train on the CPU")])
def test_gpu_vs_cpu_verdict_flips_where_the_ratio_crosses_one(gpu_ms, verdict, advice):
    f = fd.gpu_vs_cpu(table(run("cpu", 10.0), run("cl", gpu_ms, placement="resident",
                                                 transfer="copy", kernel="k")))
    assert cell(f, "verdict") == verdict
    assert f"({verdict}): {advice}" in f.statement
    assert "host clock" in f.statement


def test_the_estimates_intervals_decide_never_the_iqrs():
    # IQRs (+-1%) do not overlap, but the estimates' intervals do: cannot tell
    cpu = run("cpu", 10.0, iqr=0.01, ci=(9.0, 11.0))
    gpu = run("cl", 10.6, iqr=0.01, ci=(10.4, 11.5), placement="resident", transfer="copy",
              kernel="k")
    f = fd.gpu_vs_cpu(table(cpu, gpu))
    assert cell(f, "verdict") == "cannot tell (intervals overlap)"
    assert ESTIMATOR in f.statement and "95% CI" not in f.statement and "IQR" not in f.statement
    # no interval recorded with the estimate: the IQRs, apart, give no verdict
    bare = {"iteration_low_ms": None, "iteration_high_ms": None}
    f = fd.gpu_vs_cpu(table(run("cpu", 10.0, iqr=0.01, **bare),
                            run("cl", 10.6, iqr=0.01, placement="resident", transfer="copy",
                                kernel="k", **bare)))
    assert cell(f, "verdict") == "cannot tell (no interval recorded)"
    assert "cannot tell" in f.statement and "GPU slower" not in f.statement


def _movement(events, calls, below=None, gap_share=0.0):
    return table(run("cl", 10.0, placement="staged", transfer="copy", kernel="k",
                     data_movement_share=events, data_movement_call_share=calls,
                     transfer_ms=events * 10.0, transfer_below_resolution=below,
                     gap_ms=gap_share * 10.0))


@pytest.mark.parametrize("events, calls, words", [
    (0.49, 0.40, ["by device events 49.0%: it does not dominate",
                  "by call time 40.0%: it does not dominate", "not the main cost"]),
    (0.20, 0.61, ["by device events 20.0%: it does not dominate",
                  "by call time 61.0%: it dominates", "the cost sits in the transfer calls"]),
    (0.51, 0.70, ["by device events 51.0%: it dominates", "keep tensors resident"]),
])
def test_data_movement_verdict_follows_each_measure(events, calls, words):
    f = fd.data_movement(_movement(events, calls))
    for text in words:
        assert text in f.statement


def test_transfers_below_the_timer_resolution_are_upper_bounds_never_zero():
    f = fd.data_movement(_movement(0.0, 0.0, below=True))
    assert cell(f, "share (device events)") == "< resolution"
    assert cell(f, "transfer (ms, device events)") == "< resolution"
    assert cell(f, "transfer / kernel time") == "n/a"
    assert "0.0%" not in f.statement and "upper bounds" in f.statement
    f = fd.data_movement(_movement(0.004, 0.01, below=True))
    assert cell(f, "share (device events)") == "<= 0.4% (< resolution)"
    assert wording.ms(0.0) == "0 ms" and wording.ms(0.0, True) == "< resolution"


@pytest.mark.parametrize("share, advice", [(0.19, "not where the time goes"),
                                           (0.21, "fewer, larger kernels (fusion) would pay")])
def test_launch_gap_advice_only_above_its_threshold(share, advice):
    f = fd.launch_overhead(_movement(0.1, 0.2, gap_share=share))
    assert advice in f.statement and f"{share:.1%}" in f.statement


@pytest.mark.parametrize("fused_ms, verdict", [
    (10.2, "iteration time: cannot tell (intervals overlap)"),
    (5.0, "fused faster (5 ms [4.75-5.25] vs 10 ms [9.5-10.5], host clock)"),
    (15.0, "fused slower (15 ms [14.2-15.8] vs 10 ms [9.5-10.5], host clock)")])
def test_launch_counts_and_the_fewer_launch_verdict_follow_the_numbers(fused_ms, verdict):
    kw = {"placement": "resident", "transfer": "copy", "data_movement_share": 0.01,
          "data_movement_call_share": 0.01}
    runs = table(run("base", 10.0, kernel="baseline", launches_per_iteration=26,
                     kernel_gap_median_us=12.5, launch_overhead_us=30.0, **kw),
                 run("fused", fused_ms, kernel="fused", launches_per_iteration=8,
                     kernel_gap_median_us=11.0, launch_overhead_us=40.0, **kw))
    f = fd.launch_overhead(runs)
    assert ("d m: fused 8 (gap between kernels 11 us, 40 us per launch), baseline 26 (gap "
            "between kernels 12.5 us, 30 us per launch); 3x fewer launches: " + verdict) \
        in f.statement
    assert cell(f, "launches / iteration", 0) == "26" and cell(f, "launches / iteration", 1) == "8"


@pytest.mark.parametrize("staged_ms, verdict", [(10.2, "cannot tell (intervals overlap)"),
                                                (15.0, "staged slower"),
                                                (6.0, "staged faster")])
def test_placement_verdict(staged_ms, verdict):
    runs = table(run("res", 10.0, placement="resident", transfer="copy", kernel="k"),
                 run("stg", staged_ms, placement="staged", transfer="copy", kernel="k"))
    assert cell(fd.placement(runs), "verdict") == verdict


@pytest.mark.parametrize("map_ms, verdict", [(9.9, "cannot tell (intervals overlap)"),
                                             (5.0, "map faster")])
def test_transfer_method_verdict(map_ms, verdict):
    runs = table(run("copy", 10.0, placement="staged", transfer="copy", kernel="k"),
                 run("map", map_ms, placement="staged", transfer="map", kernel="k"))
    assert cell(fd.transfer_method(runs), "verdict") == verdict


def test_size_trend_is_per_device_never_across_devices():
    rows = []
    for dev, (small, large) in (("host", (2.0, 1.0)), ("phone", (1.0, 3.0))):
        for model, q, flops in (("small", small, 1e6), ("large", large, 1e9)):
            rows += [run(f"{model}.cpu", 10.0, device=dev, model=model,
                         flops_per_iteration=flops),
                     run(f"{model}.cl", 10.0 * q, device=dev, model=model,
                         placement="resident", transfer="copy", kernel="k",
                         flops_per_iteration=flops)]
    f = fd.size_trend(table(*rows))
    assert "on host the ratio shrinks from 2x (small) to 1x (large)" in f.statement
    assert "on phone the ratio grows from 1x (small) to 3x (large)" in f.statement
    # one device with one model each: no trend, nothing compared across devices
    f = fd.size_trend(table(*[r for r in rows if (r["device"], r["model"]) in
                              (("host", "small"), ("phone", "large"))]))
    assert not f.measured


def _bw(small_gbps: float) -> pd.DataFrame:
    sizes = [4096, 65536, 1 << 20, 1 << 24]
    peak = 10.0
    gbps = [small_gbps * peak, 0.8 * peak, 0.95 * peak, peak]
    return pd.DataFrame({"device": "d", "kind": "h2d", "size_bytes": sizes,
                         "host_gbps": gbps, "device_gbps": [g * 1.1 for g in gbps],
                         "host_ns": [s / g for s, g in zip(sizes, gbps)]})


@pytest.mark.parametrize("frac, dominated", [(0.49, True), (0.51, False)])
def test_small_transfer_advice_follows_their_share_of_the_peak(frac, dominated):
    f = fd.bandwidth(_bw(frac))
    assert ("per-call overhead dominates small tensors" in f.statement) is dominated
    assert f"{frac:.1%}" in f.statement


def test_kernel_optimization_names_the_best_result_and_labels_medians_over_shapes():
    rows = []
    for shape, (base, tiled, clblast) in {64: (1.0, 4.0, 2.0), 128: (2.0, 4.0, 8.0),
                                         256: (2.0, 20.0, 10.0)}.items():
        for k, g in (("baseline", base), ("tiled", tiled), ("clblast", clblast)):
            rows.append({"device": "d", "kernel": k, "gemm": "gemm_nn", "m": shape,
                         "n": shape, "k": shape, "shape_source": "square", "status": "ok",
                         "gflops": g})
    f = fd.kernel_optimization(schema.frame(rows, "gemm"), schema.empty("peaks"))
    assert "best tiled 20 GFLOPS at gemm_nn 256x256x256 (same shape: baseline 2, CLBlast 10)" \
        in f.statement
    assert "median over 3 shapes of the per-shape ratio: 4x baseline, 2x CLBlast" in f.statement


def test_an_unstable_side_cannot_tell_and_is_listed():
    runs = table(run("cpu", 10.0), run("cl", 5.0, placement="resident", transfer="copy",
                                       kernel="k", status="unstable",
                                       status_reason="other processes used 40% of the CPU",
                                       other_cpu_share=0.4, load_avg_1m=3.2))
    f = fd.gpu_vs_cpu(runs)
    # 2x apart, inside the noise an unstable run may carry: no verdict, the reason named
    assert cell(f, "verdict") == "cannot tell (unstable: other processes used 40% of the CPU)"
    assert "GPU faster" not in f.statement and "use the GPU" not in f.statement
    listed = fd.unstable_runs(runs)
    assert [u["run_id"] for u in listed] == ["d/cl"]
    assert "40% of the CPU" in listed[0]["reason"]
    assert listed[0]["conditions"] == "load 3.2, other processes 40% of CPU"
    tables = {"runs": runs, "gemm": schema.empty("gemm")}
    row = next(r for r in glance.at_a_glance(tables)["d"] if r.link == "finding-gpu_vs_cpu")
    assert row.verdict == "cannot tell (unstable: other processes used 40% of the CPU)"


@pytest.mark.parametrize("gpu_ms, verdict", [(105.0, "agrees"), (95.0, "differs"), (50.0, "differs")])
def test_glance_step_time_verdict_against_the_papers_tenfold_slowdown(gpu_ms, verdict):
    runs = table(run("cpu", 10.0, iqr=0.02), run("cl", gpu_ms, iqr=0.02, placement="resident",
                                                 transfer="copy", kernel="k"))
    rows = glance.at_a_glance({"runs": runs, "gemm": schema.empty("gemm")})["d"]
    step = rows[0]
    assert step.finding == "GPU vs CPU step time" and step.second_hand
    assert step.verdict == verdict and "host clock" in step.study


@pytest.mark.parametrize("calls, verdict", [(0.45, "differs"), (0.55, "agrees")])
def test_glance_data_movement_verdict_per_measure(calls, verdict):
    rows = glance.at_a_glance({"runs": _movement(0.1, calls), "gemm": schema.empty("gemm")})["d"]
    by = {r.finding: r for r in rows}
    assert by["Share of data movement (device events)"].verdict == "differs"
    assert by["Share of data movement (call time)"].verdict == verdict
    assert by["Gain from kernel optimization (GEMM)"].verdict == "not measured"


def test_judge_and_overlap_rules():
    S = wording.Side
    assert str(wording.judge(S(10, 9, 11), S(11, 10, 12))) == "cannot tell (intervals overlap)"
    assert str(wording.judge(S(10, 9, 11), S(6, 5, 8))) == "faster"
    assert str(wording.judge(S(10, 9, 11), S(12.5, 12, 13))) == "slower"
    assert str(wording.judge(S(10, 9, 11), S(12.5, 12, 13), lower_is_better=False)) == "faster"
    assert str(wording.judge(S(10, 9, 11), S(10.4, float("nan"), float("nan")))) == \
        "cannot tell (no interval recorded)"
    assert str(wording.judge(S(10, 9, 11, settings={"threads": 2}),
                             S(5, 4, 6, settings={"threads": 4}))) == \
        "cannot tell (settings differ: threads 2 vs 4)"
    assert str(wording.judge(S(10, 9, 11, estimator="median"), S(5, 4, 6, estimator="min"))) \
        == "cannot tell (settings differ: estimator 'median' vs 'min')"
    assert str(wording.judge(S(10, 9, 11, status="wrong"), S(5, 4, 6))) == \
        "not valid (failed verification)"
    assert wording.overlap_verdict(8, 12, 10, None) == "agrees"
    assert wording.overlap_verdict(0.5, 0.9, 10, None) == "differs"
    assert wording.overlap_verdict(float("nan"), 1, 10, None) == "not measured"


def test_a_contended_cpu_baseline_is_flagged_where_it_is_used():
    busy = run("cpu", 100.0, other_cpu_share=0.35, load_avg_1m=4.0, omp_wait_policy="active")
    gpu = run("cl", 8.88, placement="resident", transfer="copy", kernel="k")
    f = fd.gpu_vs_cpu(table(busy, gpu))
    assert "Suspect: CPU baseline(s) d/cpu" in f.statement
    assert cell(f, "CPU run's conditions") == \
        "load 4, other processes 35% of CPU, OMP_WAIT_POLICY active"
    assert "d/cpu, 35%" in glance.contention_note(table(busy, gpu))
    calm = run("cpu", 100.0, other_cpu_share=0.02)
    assert "Suspect" not in fd.gpu_vs_cpu(table(calm, gpu)).statement
    assert glance.contention_note(table(calm, gpu)) is None


def test_a_share_that_dominates_in_some_runs_only_says_so():
    runs = table(*[run(f"cl{i}", 10.0, model=f"m{i}", placement="staged", transfer="copy",
                       kernel="k", data_movement_share=0.003, data_movement_call_share=c)
                   for i, c in enumerate((0.751, 0.024))])
    f = fd.data_movement(runs)
    assert ("by call time 2.4% (m1 staged/copy k) to 75.1% (m0 staged/copy k), median 38.8%: "
            "it dominates in 1 of 2 runs") in f.statement   # a range names its extreme runs
    assert "where it dominates by call time (1 run(s))" in f.statement
    rows = {r.finding: r for r in glance.at_a_glance({"runs": runs,
                                                      "gemm": schema.empty("gemm")})["d"]}
    assert rows["Share of data movement (call time)"].verdict == "differs (1 of 2 runs agree)"


@pytest.mark.parametrize("overlap_ms, words", [
    (0.0, "no overlap measured"), (0.04, "no overlap measured"),   # < 5% of 1 ms transfer
    (0.6, "overlap measured in 1 of 1 run(s)")])
def test_pipelining_overlap_wording_follows_the_number(overlap_ms, words):
    """Pipelined vs staged: the overlap clause follows transfer_kernel_overlap_ms; the table
    gives max(kernel, transfer) against their sum."""
    runs = table(run("stg", 10.0, placement="staged", transfer="copy", kernel="k"),
                 run("pip", 6.0, placement="pipelined", transfer="copy", kernel="k",
                     kernel_ms=3.0, transfer_ms=1.0, transfer_kernel_overlap_ms=overlap_ms,
                     timer_resolution_ns=1.0))
    f = fd.pipelining(runs)
    assert words in f.statement and "host clock" in f.statement
    assert "would save at most 25.0% of it" in f.statement   # min(3, 1) / (3 + 1)
    assert cell(f, "verdict") == "pipelined faster"
    assert cell(f, "max(kernel, transfer) / sum, pipelined (device events)") == "3 ms / 4 ms"
    text = cell(f, "overlap (device events)")
    assert text.startswith("overlap:" if "in 1 of 1" in words else "no overlap measured")
    rows = glance.at_a_glance({"runs": runs, "gemm": schema.empty("gemm")})["d"]
    row = next(r for r in rows if r.link == "finding-pipelining")
    assert row.finding == "Pipelined vs staged transfers" and "pipelined / staged" in row.study


def _contended(run_id, med, spread=0.3, **kw):
    """An unstable run measured under contention: interval +-``spread`` x ``med``."""
    return run(run_id, med, ci=(med * (1 - spread), med * (1 + spread)), status="unstable",
               status_reason="other processes used 60% of the CPU", other_cpu_share=0.6,
               load_avg_1m=4.1, **kw)


def test_a_finding_that_survives_noise_is_stated_from_unstable_runs():
    """Every run unstable, OpenCL 20x and 40x slower: at the extremes of every interval still
    far beyond the noise factor, so it is stated, marked measured under contention."""
    cl = dict(placement="resident", transfer="copy", kernel="k")
    runs = table(_contended("a.cpu", 1.0, model="a"), _contended("a.cl", 20.0, model="a", **cl),
                 _contended("b.cpu", 1.0, model="b"), _contended("b.cl", 40.0, model="b", **cl))
    f = fd.gpu_vs_cpu(runs)
    assert f.measured and "Not measured" not in f.statement
    v = cell(f, "verdict")
    assert v.startswith("GPU slower (measured under contention: load 4.1, other processes 60% "
                        "of CPU")
    assert "train on the CPU" in f.statement and "measured under contention" in f.statement
    rows = glance.at_a_glance({"runs": runs, "gemm": schema.empty("gemm")})["d"]
    step = next(r for r in rows if r.link == "finding-gpu_vs_cpu")
    # 20x [10.8-37.1] and 40x [21.5-74.3], widened 3x, still reach the paper's >= 10x
    assert step.verdict == "agrees (measured under contention)"
    assert "GPU slower (measured under contention" in step.study
    # 2x slower under the same contention: inside the noise, cannot tell
    runs = table(_contended("a.cpu", 1.0, model="a"), _contended("a.cl", 2.0, model="a", **cl))
    assert cell(fd.gpu_vs_cpu(runs), "verdict") == \
        "cannot tell (unstable: other processes used 60% of the CPU)"
    rows = glance.at_a_glance({"runs": runs, "gemm": schema.empty("gemm")})["d"]
    assert rows[0].verdict == "cannot tell (unstable: other processes used 60% of the CPU)"


def test_launch_gaps_from_unstable_runs_only_are_shown_marked():
    """With every OpenCL run unstable the launch-gap row shows their figure, marked measured
    under contention (no paper figure to contradict), not "unstable"."""
    stg = dict(placement="staged", transfer="copy", kernel="k", data_movement_share=0.3,
               data_movement_call_share=0.4, gap_ms=2.0, transfer_overhead_ms=0.5)
    runs = table(_contended("s", 10.0, **stg))
    rows = {r.finding: r for r in glance.at_a_glance({"runs": runs,
                                                       "gemm": schema.empty("gemm")})["d"]}
    gaps = rows["Launch overhead (gaps outside transfer calls)"]
    assert gaps.verdict == "no paper figure"
    assert "measured under contention" in gaps.study and "over 1 OpenCL run" in gaps.study
    ok = table(run("s", 10.0, **stg))
    gaps = next(r for r in glance.at_a_glance({"runs": ok, "gemm": schema.empty("gemm")})["d"]
                if r.link == "finding-launch_overhead")
    assert "measured under contention" not in gaps.study
    # the sections the rows link to show the same figures, opened by the contention warning
    # instead of "Not measured"; with usable runs, no warning
    for finding in (fd.launch_overhead, fd.data_movement):
        f = finding(runs)
        assert f.measured and f.statement.startswith(fd.CONTENDED_ONLY), f.statement
        assert fd.CONTENDED_ONLY not in finding(ok).statement
    assert "by device events 30.0%: it does not dominate" in fd.data_movement(runs).statement
    assert fd.data_movement(table(run("cpu", 10.0))).statement == \
        "Not measured: no verified OpenCL run."


@pytest.mark.parametrize("share, verdict", [
    # odds 0.1 widened 3x: 3.2% to 23.1%, below 50% at either end
    (0.0909, "differs (measured under contention)"),
    # odds 9 widened 3x: 75% to 96.4%, above 50% at either end
    (0.9, "agrees (measured under contention)"),
    # a call share read a hair over the iteration counts as all of it
    (1.02, "agrees (measured under contention)"),
    # odds 0.667 widened 3x: 18.2% to 66.7%, on both sides of 50%
    (0.4, "cannot tell (widened 3x for the noise, 18.2% to 66.7% lies on both sides of 50.0%)")])
def test_a_data_movement_share_from_unstable_runs_is_decided_beyond_the_noise(share, verdict):
    """Only unstable staged runs: the share is decided against the paper's "dominant" when its
    odds (movement time / the rest), divided and multiplied by the noise factor, stay on one
    side of 50%; a run with a usable share decides by its share alone."""
    stg = dict(placement="staged", transfer="copy", kernel="k", data_movement_share=share,
               data_movement_call_share=share)
    rows = {r.finding: r for r in glance.at_a_glance(
        {"runs": table(_contended("s", 10.0, **stg)), "gemm": schema.empty("gemm")})["d"]}
    row = rows["Share of data movement (device events)"]
    assert row.verdict == verdict
    assert "measured under contention: each share's odds widened 3x" in row.study
    lo, hi = wording.widened_share(min(share, 1.0))
    assert lo <= min(share, 1.0) <= hi
    assert share >= 1 or math.isclose(lo / (1 - lo) * 9, hi / (1 - hi))
    usable = {r.finding: r for r in glance.at_a_glance(
        {"runs": table(run("s", 10.0, **stg)), "gemm": schema.empty("gemm")})["d"]}
    assert "contention" not in usable["Share of data movement (device events)"].verdict
    with pytest.raises(ValueError, match="must lie in"):
        wording.widened_share(1.2)


@pytest.mark.parametrize("shares, verdict", [
    ((0.4, 0.0909), "differs (measured under contention); cannot tell for 1 of 2 runs"),
    ((0.9, 0.0909), "differs (1 of 2 runs agree) (measured under contention)")])
def test_unstable_runs_shares_are_counted_run_by_run(shares, verdict):
    """Several unstable runs: each decided or not on its own, the row counting both."""
    runs = table(*[_contended(f"r{i}", 10.0, placement="staged", transfer="copy", kernel="k",
                              data_movement_share=s, data_movement_call_share=s)
                   for i, s in enumerate(shares)])
    rows = {r.finding: r for r in glance.at_a_glance({"runs": runs,
                                                      "gemm": schema.empty("gemm")})["d"]}
    assert rows["Share of data movement (device events)"].verdict == verdict


def test_pairs_from_unstable_runs_need_the_noise_factor_too():
    runs = table(_contended("res", 1.0, placement="resident", transfer="copy", kernel="k"),
                 _contended("stg", 10.0, placement="staged", transfer="copy", kernel="k"))
    f = fd.placement(runs)
    assert cell(f, "verdict").startswith("staged slower (measured under contention")
    assert "measured under contention" in f.statement
    runs = table(_contended("res", 1.0, placement="resident", transfer="copy", kernel="k"),
                 run("stg", 1.5, placement="staged", transfer="copy", kernel="k", iqr=0.01))
    assert cell(fd.placement(runs), "verdict") == \
        "cannot tell (unstable: other processes used 60% of the CPU)"
    # the glance row then has no verdict of its own either, not "no paper figure"
    row = next(r for r in glance.at_a_glance({"runs": runs, "gemm": schema.empty("gemm")})["d"]
               if r.link == "finding-placement")
    assert row.verdict == "cannot tell" and row.study.startswith("cannot tell (unstable")


def test_data_movement_is_set_beside_the_paper_on_placements_that_move_data_only():
    """A resident run moves almost nothing by design: it never decides the verdict against
    the paper's ~91%."""
    res = run("res", 10.0, model="a", placement="resident", transfer="copy", kernel="k",
              data_movement_share=0.02, data_movement_call_share=0.03)
    stg = run("stg", 10.0, model="a", placement="staged", transfer="map", kernel="k",
              data_movement_share=0.8, data_movement_call_share=0.9)
    f = fd.data_movement(table(res, stg))
    assert "by device events 80.0%: it dominates" in f.statement
    assert "1 resident run(s) move only the batch and the loss" in f.statement
    rows = {r.finding: r for r in glance.at_a_glance({"runs": table(res, stg),
                                                      "gemm": schema.empty("gemm")})["d"]}
    assert rows["Share of data movement (device events)"].verdict == "agrees"
    assert "over 1 staged or pipelined" in rows["Share of data movement (device events)"].study
    rows = {r.finding: r for r in glance.at_a_glance({"runs": table(res),
                                                      "gemm": schema.empty("gemm")})["d"]}
    assert rows["Share of data movement (device events)"].verdict == "not measured"


def _gemm(spread):
    """baseline 2 and tiled 9 GFLOPS (4.5x) on two shapes; kernel-time intervals +-spread."""
    rows = []
    for shape in (64, 128):
        for k, g in (("baseline", 2.0), ("tiled", 9.0)):
            ms = 2 * shape ** 3 / (g * 1e6)
            rows.append({"device": "d", "kernel": k, "gemm": "gemm_nn", "m": shape, "n": shape,
                         "k": shape, "shape_source": "square", "status": "ok", "gflops": g,
                         "median_ms": ms,
                         "low_ms": None if spread is None else ms * (1 - spread),
                         "high_ms": None if spread is None else ms * (1 + spread)})
    return schema.frame(rows, "gemm")


@pytest.mark.parametrize("spread, verdict, table_verdict", [
    (None, "cannot tell (no interval recorded)", "cannot tell (no interval recorded)"),
    (0.02, "agrees", "optimized faster")])
def test_gain_from_kernel_optimization_rests_on_per_shape_intervals(spread, verdict,
                                                                     table_verdict):
    g = _gemm(spread)
    f = fd.kernel_optimization(g, schema.empty("peaks"))
    assert cell(f, "verdict") == table_verdict
    assert cell(f, "conditions (optimized / baseline)") == "not recorded / not recorded"
    row = next(r for r in glance.at_a_glance({"runs": schema.empty("runs"), "gemm": g})["d"]
               if r.link == "finding-kernel_optimization")
    assert row.verdict == verdict and "IQR" not in row.study
    if spread:
        assert cell(f, "optimized / baseline [interval]") == "4.5x [4.32-4.68]"


def test_bandwidth_figures_carry_their_interval_or_say_none_was_recorded():
    bw = _bw(0.6)
    assert "(no interval recorded)" in fd.bandwidth(bw).statement
    f = fd.bandwidth(bw.assign(host_gbps_low=bw["host_gbps"] * 0.9,
                               host_gbps_high=bw["host_gbps"] * 1.1))
    assert "d h2d 10 GB/s [9-11]" in f.statement
