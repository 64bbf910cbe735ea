"""Aggregation into schema-checked Parquet tables, statuses, provenance, schema enforcement."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from helpers.real_study import FAILED, OK, WRONG
from helpers.results import GAP_NS, standard_study, summary_paths, write_run
from phonetrain.config import MeasureConfig
from phonetrain.errors import ResultsFileError
from phonetrain.results import aggregate, schema
from phonetrain.results import runs as run_folders


@pytest.fixture
def study(tmp_path):
    inputs = standard_study(tmp_path / "raw")
    paths = aggregate.aggregate(inputs["runs"], summary_paths(tmp_path / "summary"),
                                bandwidth_csvs=inputs["bandwidth"], build_jsons=inputs["builds"],
                                gemm_jsons=inputs.get("gemm", ()),
                                peaks_jsons=inputs.get("peaks", ()))
    return paths


def test_every_table_written_with_its_schema(study):
    assert set(study) == set(schema.TABLES)
    for table, path in study.items():
        assert path.name == f"{table}.parquet"
        assert pq.read_schema(path).equals(schema.schema(table), check_metadata=False)
        schema.read_table(path, table)  # re-checks
    assert not list(study["runs"].parent.glob(".*tmp"))


def test_runs_are_ok_wrong_or_failed_with_a_reason(study):
    runs = schema.read_table(study["runs"], "runs").set_index("run_id")
    assert runs.loc["host/mlp_784_256_128_16.cpu.none", "status"] == "ok"
    assert runs.loc["host/mlp_784_256_128_16.opencl.baseline", "status"] == "ok"
    wrong = runs.loc["host/mlp_784_256_128_16.opencl_staged.baseline"]
    assert wrong["status"] == "wrong" and "0.5" in wrong["status_reason"]
    assert wrong["verify_tolerance"] == pytest.approx(1e-3)  # params' verify_atol
    failed = runs.loc["host/lenet5.cpu.none"]
    assert failed["status"] == "failed" and "NaN loss" in failed["status_reason"]
    assert pd.isna(failed["iteration_median_ms"])
    assert runs.loc["host/mlp_784_256_128_16.cpu.none", "placement"] == "none"


def test_run_numbers_follow_the_trace(study):
    runs = schema.read_table(study["runs"], "runs").set_index("run_id")
    cpu = runs.loc["host/mlp_784_256_128_16.cpu.none"]
    # 3 kernels of 100 us, each after a 10 us gap, plus a 10 us tail: 0.34 ms per iteration
    assert cpu["iteration_median_ms"] == pytest.approx(0.34)
    assert cpu["kernel_ms"] == pytest.approx(0.30)
    assert cpu["gap_ms"] == pytest.approx(4 * GAP_NS / 1e6)
    assert cpu["data_movement_share"] == 0
    assert cpu["kernel_gflops"] == pytest.approx(3 * 2e6 / 0.30e6)
    gpu = runs.loc["host/mlp_784_256_128_16.opencl.baseline"]
    # h2d 0.6 + 3 kernels of 0.4 + d2h 0.6 + 6 gaps of 0.01 = 2.46 ms; movement 1.2 ms
    assert gpu["iteration_median_ms"] == pytest.approx(2.46)
    assert gpu["transfer_ms"] == pytest.approx(1.2)
    assert gpu["data_movement_share"] == pytest.approx(1.2 / 2.46)
    assert gpu["loss_first"] == pytest.approx(2.3) and gpu["loss_last"] == pytest.approx(1.9)
    assert gpu["repeats"] == 1 and gpu["iterations"] == 4


def test_launch_columns_follow_the_trace(study):
    """launches_per_iteration counts the kernels; consecutive kernels are 10 us apart; the
    iteration's uncovered time (one 10 us gap per command plus the tail) per launch."""
    runs = schema.read_table(study["runs"], "runs").set_index("run_id")
    cpu = runs.loc["host/mlp_784_256_128_16.cpu.none"]
    gpu = runs.loc["host/mlp_784_256_128_16.opencl.baseline"]
    for row, commands in ((cpu, 3), (gpu, 5)):
        assert row["launches_per_iteration"] == 3
        assert row["kernel_gap_median_us"] == pytest.approx(GAP_NS / 1e3)
        assert row["launch_overhead_us"] == pytest.approx((commands + 1) * GAP_NS / 1e3 / 3)
    failed = runs.loc["host/lenet5.cpu.none"]
    assert pd.isna(failed["launches_per_iteration"]) and pd.isna(failed["launch_overhead_us"])


def test_every_row_carries_provenance(study):
    for table in ("runs", "iterations", "commands", "bandwidth", "builds"):
        df = schema.read_table(study[table], table)
        assert len(df), table
        for col in ("config_hash", "git_rev"):
            assert df[col].notna().all(), (table, col)
    runs = schema.read_table(study["runs"], "runs")
    ok = runs[runs["status"] != "failed"]
    assert (ok["runner_hash"] == "runner-h").all() and ok["device_fingerprint"].notna().all()


def test_iterations_and_commands_tables_count_measured_iterations(study):
    it = schema.read_table(study["iterations"], "iterations")
    gpu = it[it["run_id"] == "host/mlp_784_256_128_16.opencl.baseline"]
    assert len(gpu) == 5 and gpu["measured"].sum() == 4 and (gpu["repeat"] == 0).all()
    cmds = schema.read_table(study["commands"], "commands")
    g = cmds[(cmds["run_id"] == "host/mlp_784_256_128_16.opencl.baseline")].set_index("name")
    assert g.loc["gemm_0", "count"] == 4
    assert g.loc["h2d", "gbps"] == pytest.approx(4096 / 600_000)


def test_same_experiment_on_two_devices_gets_one_run_id_per_device(tmp_path):
    """An experiment id repeats on every device; every table keys runs by <device>/<id>."""
    raw = tmp_path / "raw"
    dirs = [write_run(raw, device=dev, backend="opencl", placement="resident",
                      transfer="copy", kernel="baseline") for dev in ("host", "phone")]
    dirs.append(write_run(raw, device="phone", backend="cpu", failed_reason="adb: offline"))
    dirs.append(write_run(raw, device="host", backend="cpu"))  # expected, never produced
    for f in ("run.json", "trace.csv", "verify.json"):
        (dirs[-1] / f).unlink()
    paths = aggregate.aggregate(dirs, summary_paths(tmp_path / "summary"))
    exp = "mlp_784_256_128_16.opencl.baseline"
    runs = schema.read_table(paths["runs"], "runs").set_index("run_id")
    assert runs.index.is_unique
    assert sorted(runs.index) == sorted([f"host/{exp}", f"phone/{exp}",
                                         "host/mlp_784_256_128_16.cpu.none",
                                         "phone/mlp_784_256_128_16.cpu.none"])
    assert (runs.index.str.split("/").str[0] == runs["device"]).all()
    assert runs.loc["phone/mlp_784_256_128_16.cpu.none", "status_reason"] == "adb: offline"
    assert "no run.json" in runs.loc["host/mlp_784_256_128_16.cpu.none", "status_reason"]
    for table in ("iterations", "commands"):
        df = schema.read_table(paths[table], table)
        assert set(df["run_id"]) == {f"host/{exp}", f"phone/{exp}"}, table
        assert (df["run_id"] == df["device"] + f"/{exp}").all(), table
    assert run_folders.run_id("host", f"host/{exp}") == f"host/{exp}"  # already keyed


def test_read_run_writes_perfetto_only_on_request(tmp_path):
    d = write_run(tmp_path)
    run_folders.read_run(d)
    assert not (d / "trace.perfetto.json").exists()  # the workflow's train job writes it
    run_folders.read_run(d, write_perfetto=True)
    assert (d / "trace.perfetto.json").exists()


def test_expected_run_without_output_is_failed(tmp_path):
    d = write_run(tmp_path, backend="opencl", kernel="tiled")
    for f in ("run.json", "trace.csv", "verify.json"):
        (d / f).unlink()
    row = run_folders.read_run(d)["runs"].iloc[0]
    assert row["status"] == "failed" and "no run.json" in row["status_reason"]


def test_missing_verification_is_not_ok(tmp_path):
    d = write_run(tmp_path)
    (d / "verify.json").unlink()
    row = run_folders.read_run(d)["runs"].iloc[0]
    # the verdict lost: the folder no longer holds a measurement (the workflow re-measures it)
    assert row["status"] == "failed" and "verify.json: missing" in row["status_reason"]


def test_repeats_pool_measured_iterations(tmp_path):
    d = write_run(tmp_path, iterations=3)
    rep = write_run(tmp_path / "r", iterations=3, kernel_ns=200_000)
    rep.rename(d / "repeat_1")
    out = run_folders.read_run(d)
    assert out["runs"].iloc[0]["repeats"] == 2
    assert sorted(out["iterations"]["repeat"].unique()) == [0, 1]
    assert out["commands"].set_index("name").loc["gemm_0", "count"] == 6


def test_schema_refuses_extra_missing_and_mistyped_columns(tmp_path):
    df = schema.empty("runs")
    with pytest.raises(schema.SchemaError, match="unexpected columns.*speed"):
        schema.conform(df.assign(speed=[]), "runs")
    with pytest.raises(schema.SchemaError, match="missing columns.*status"):
        schema.conform(df.drop(columns=["status"]), "runs")
    row = schema.frame([{"run_id": "r", "model": "m", "device": "d", "backend": "cpu",
                             "status": "fast", "config_hash": "c", "git_rev": "g"}], "runs")
    with pytest.raises(schema.SchemaError, match="'status'.*fast"):
        schema.conform(row, "runs")
    with pytest.raises(schema.SchemaError, match="'iteration_median_ms'"):
        schema.conform(row.assign(status="ok", iteration_median_ms="slow"), "runs")
    with pytest.raises(schema.SchemaError, match="'git_rev'.*null"):
        schema.conform(row.assign(status="ok", git_rev=None), "runs")
    schema.write_table(row.assign(status="ok"), "runs", tmp_path / "runs.parquet")
    with pytest.raises(schema.SchemaError, match="runs.parquet.*'iterations'"):
        schema.read_table(tmp_path / "runs.parquet", "iterations")


def test_conform_takes_missing_values_of_every_kind_as_null():
    """The values conform hands to Arrow: each missing one (NaN, NaT, pd.NA, None) as None,
    the others as pandas' own Python objects, a list cell kept whole, for numpy, masked,
    string and object columns alike."""
    df = pd.DataFrame({"f": [1.5, np.nan, 2.0], "i": pd.array([1, None, 3], dtype="Int64"),
                       "s": pd.array(["a", None, "c"], dtype="str"),
                       "t": pd.to_datetime(["2026-12-07", None, "2026-12-08"]),
                       "o": [[1, 2], None, "x"], "b": [True, False, True]})
    for c in df.columns:
        want = df[c].astype(object).where(df[c].notna(), None).tolist()
        got = schema._values(df[c])
        assert got == want and [type(v) for v in got] == [type(v) for v in want], c
        assert (got[1] is None) == (c != "b"), c


def test_bad_params_json_error_names_the_file_and_key(tmp_path):
    d = write_run(tmp_path)
    (d / "params.json").write_text('{"model": "m"}')
    with pytest.raises(ResultsFileError, match=r"params\.json.*'device'"):
        run_folders.read_run(d)


# ---- the real runner on PoCL (tests/helpers/real_study.py) -----------------------------

@pytest.fixture(scope="module")
def real(real_study, tmp_path_factory):
    inputs = real_study
    paths = aggregate.aggregate(inputs["runs"], summary_paths(tmp_path_factory.mktemp("real-summary")),
                                bandwidth_csvs=inputs["bandwidth"], build_jsons=inputs["builds"],
                                gemm_jsons=inputs.get("gemm", ()),
                                peaks_jsons=inputs.get("peaks", ()))
    return inputs, {t: schema.read_table(p, t) for t, p in paths.items()}


def test_real_runs_get_their_statuses_and_consistent_numbers(real):
    _, t = real
    runs = t["runs"].set_index("run_id")
    wrong, failed, ok = f"host/{WRONG}", f"host/{FAILED}", [f"host/{r}" for r in OK]
    assert runs.loc[wrong, "status"] == "wrong" and "bound 1e-12" in runs.loc[wrong, "status_reason"]
    assert runs.loc[failed, "status"] == "failed"
    for rid in ok:
        r = runs.loc[rid]
        assert r["status"] == "ok", (rid, r["status_reason"])
        assert 0 < r["iteration_p25_ms"] <= r["iteration_median_ms"] <= r["iteration_p75_ms"]
        assert 0 < r["kernel_ms"] <= r["iteration_median_ms"]
        assert 0 <= r["data_movement_share"] <= 1 and r["gap_ms"] >= 0
        assert r["verify_max_abs_err"] < 1e-3 and np.isfinite([r["loss_first"], r["loss_last"]]).all()
        assert r["kernel_gflops"] > 0 and r["repeats"] == MeasureConfig().repeats
        assert r["iterations"] == 3
        assert r["runner_hash"] and r["device_fingerprint"] and r["config_hash"]
        # per-step verdict, trajectory drift, interval and conditions filled
        assert 0 <= r["verify_max_abs_err"] <= r["verify_tolerance"]
        assert 0 <= r["trajectory_drift_max"] < 1e-3
        assert r["iteration_ci_low_ms"] <= r["iteration_median_ms"] <= r["iteration_ci_high_ms"]
        assert r["omp_wait_policy"] == "ACTIVE" and 0 <= r["other_cpu_share"] <= 1
        assert r["load_avg_1m"] >= 0 and not r["cpu_mhz_start"] <= 0   # null where unreadable
    cpu, res, smap = (runs.loc[rid] for rid in ok)
    assert pd.isna(cpu["below_resolution_commands"]) and pd.isna(cpu["kernel_below_resolution"])
    assert res["below_resolution_commands"] >= 0 and not res["kernel_below_resolution"]
    assert cpu["data_movement_share"] == 0 and pd.isna(cpu["kernel_hash"])
    assert res["h2d_ms"] > 0 and res["d2h_ms"] > 0 and res["map_ms"] == 0  # batch up, loss down
    assert smap["map_ms"] > 0 and smap["unmap_ms"] > 0 and smap["transfer_ms"] > smap["map_ms"]
    assert smap["kernel_hash"] == res["kernel_hash"]
    # enqueue brackets agree on PoCL: device and host clocks aligned to well under 1 ms
    assert 0 <= res["clock_offset_uncertainty_ns"] < 1e6


def test_real_iterations_and_commands_follow_the_trace(real):
    import json

    from phonetrain.results import profiling
    inputs, t = real
    for d in inputs["runs"]:
        if d.name not in OK:
            continue
        rid = f"host/{d.name}"  # the tables' run_id: <device>/<experiment id>
        its = t["iterations"][t["iterations"]["run_id"] == rid]
        # one runner process per repeat: repeat 0 in the run folder, repeat_<k>/ beside it,
        # then, where the step ran without per-command events, the events/ process
        procs = [d] + sorted(d.glob("repeat_*"), key=lambda p: int(p.name.split("_")[1]))
        apart = (d / "events").is_dir()
        roles = ["step" if apart else "both"] * len(procs) + (["breakdown"] if apart else [])
        procs += [d / "events"] if apart else []
        assert apart == d.name.split(".")[1].startswith("opencl")   # one queue: apart
        assert sorted(its["repeat"].unique()) == list(range(len(procs)))
        measured_rows = 0
        for rep, (pdir, role) in enumerate(zip(procs, roles)):
            doc = json.loads((pdir / "run.json").read_text())
            it = its[its["repeat"] == rep].sort_values("iteration")
            assert set(it["role"]) == {role}
            assert it["wall_ms"].tolist() == pytest.approx([i["wall_ms"] for i in doc["iters"]])
            assert it["measured"].tolist() == [not i["warmup"] for i in doc["iters"]]
            if role == "step":   # no device time to break the iteration down by
                assert it["busy_ms"].isna().all()
                continue
            assert (it["busy_ms"] <= it["wall_ms"] * 1.001).all()  # commands inside the wall
            trace = profiling.read_trace_csv(pdir / "trace.csv")
            measured_rows += int((trace["warmup"] == 0).sum())
        cmds = t["commands"][t["commands"]["run_id"] == rid]
        assert int(cmds["count"].sum()) == measured_rows  # counts add up over the processes


def test_real_bandwidth_and_builds_tables_hold_every_op_and_program(real):
    _, t = real
    bw = t["bandwidth"]
    assert set(bw["kind"]) == {"h2d", "d2h", "map", "unmap", "d2d"}
    assert bw["size_bytes"].min() == 4096 and bw["size_bytes"].max() == 65536
    assert (bw["host_gbps"] > 0).all() and bw["runner_hash"].notna().all()
    assert bw["device_fingerprint"].notna().all()
    b = t["builds"]
    assert (b["status"] == "ok").all() and "gemm" in set(b["program"])
    assert (b["kernel"] == "baseline").all() and b["kernel_hash"].notna().all()
