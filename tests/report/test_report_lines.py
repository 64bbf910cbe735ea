"""What the report says in words: figures without data as one line, the CPU-device caveat,
the roofline's roofs and the points above them, and the mode of every file it writes."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import markupsafe
import pytest

from helpers.results import (report_paths, standard_study, summary_paths,
                             write_gemm_versions, write_run)
from phonetrain import io, report
from phonetrain.report import analysis, figures, findings
from phonetrain.results import aggregate


def _peaks(root: Path, device: str, gflops: float, gbps: float, vector: str) -> Path:
    """A peaks/<device>.json whose best compute row is the OpenCL type ``vector``."""
    d = root / "peaks"
    d.mkdir(parents=True, exist_ok=True)
    doc = {"mode": "bench-peak", "device_id": device,
           "device": {"name": "pthread-cpu", "platform": "Portable Computing Language"},
           "compute": [{"type": "float", "width": 1, "work_items": 64, "median_ms": 1.0,
                        "gflops": gflops / 4},
                       {"type": vector, "width": 16, "work_items": 64, "median_ms": 1.0,
                        "gflops": gflops}],
           "bandwidth": [{"kernel": "read_float4", "size_bytes": 1 << 20, "median_ms": 0.1,
                          "gbps": gbps}]}
    (d / f"{device}.json").write_text(json.dumps(doc))
    return d / f"{device}.json"


def _set_device_type(run_dir: Path, kind: str) -> None:
    doc = json.loads((run_dir / "run.json").read_text())
    doc["device"]["type"] = kind
    (run_dir / "run.json").write_text(json.dumps(doc))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """standard_study (no batch sweep, no held-out evaluation, no energy), its OpenCL runs on
    a CPU device, GEMM points of the CPU backend above an OpenCL roof of 10 GFLOPS."""
    root = tmp_path_factory.mktemp("lines")
    raw = root / "raw"
    inputs = standard_study(raw)
    for d in inputs["runs"]:
        if (d / "run.json").exists() and ".opencl" in d.name:
            _set_device_type(d, "cpu")
    gemm = write_gemm_versions(raw, "host", ["tiled"])      # cpu up to 21 GFLOPS
    peaks = [_peaks(raw, "host", 10.0, 10.5, "float16")]
    aggregate.aggregate(inputs["runs"], summary_paths(root / "summary"),
                        bandwidth_csvs=inputs["bandwidth"], build_jsons=inputs["builds"],
                        gemm_jsons=gemm, peaks_jsons=peaks)
    paths = report.build_report(root / "summary", report_paths(root / "report"), title="T")
    return paths, report.load_tables(root / "summary")


EMPTY = {"batch_sweep": "sweep.batches", "accuracy": "measure.eval_every",
         "energy": "measure.power_sample_ms"}


def test_figures_without_data_are_one_line_each(built):
    paths, _ = built
    html, md = paths["html"].read_text(), paths["md"].read_text()
    for name, setting in EMPTY.items():
        assert isinstance(paths[name], figures.NoDataFigure) and setting in paths[name].what
        line = re.search(rf'<p class="no-data" id="fig-{name}">([^<]*)</p>', html)
        assert line and "no data:" in line.group(1) and setting in line.group(1), name
        assert f"](figures/{name}.png)" not in md
        (md_line,) = [ln for ln in md.splitlines() if ln.startswith(
            f"*{report.build.FIGURES[name].title}*: no data:")]
        assert setting in md_line
        assert paths[name].is_file()                  # Snakemake's output still exists
    drawn = [n for n in report.build.FIGURES if n not in EMPTY and
             not isinstance(paths[n], figures.NoDataFigure)]
    assert "gemm_kernels" in drawn and "iteration_time" in drawn
    assert html.count('src="data:image/png;base64,') == len(drawn)


def test_caveat_when_every_opencl_device_is_a_cpu(built):
    paths, tables = built
    caveat = findings.opencl_on_cpu(tables["runs"])
    assert caveat and "every OpenCL device of this study is a CPU" in caveat
    assert caveat in paths["md"].read_text()
    assert "every OpenCL device of this study is a CPU" in paths["html"].read_text()


def test_caveat_counts_runs_that_were_not_verified(tmp_path):
    """The only OpenCL run failed verification: it still ran on a CPU device."""
    runs = [write_run(tmp_path, backend="cpu"),
            write_run(tmp_path, backend="opencl", placement="resident", transfer="copy",
                      kernel="baseline", max_abs_err=0.5)]
    _set_device_type(runs[1], "cpu")
    out = aggregate.aggregate(runs, summary_paths(tmp_path / "summary"))
    t = report.load_tables(Path(out["runs"]).parent)
    assert set(t["runs"]["status"]) == {"ok", "wrong"}
    assert "every OpenCL device of this study is a CPU" in findings.opencl_on_cpu(t["runs"])


def test_caveat_names_vulkan_beside_opencl_when_both_ran_on_a_cpu(tmp_path):
    """An OpenCL run on PoCL and a Vulkan run on lavapipe: the caveat names both APIs."""
    runs = [write_run(tmp_path, backend="cpu"),
            write_run(tmp_path, backend="opencl", placement="resident", transfer="copy",
                      kernel="baseline"),
            write_run(tmp_path, backend="vulkan", placement="resident", transfer="copy",
                      kernel="baseline")]
    for r in runs[1:]:
        _set_device_type(r, "cpu")
    out = aggregate.aggregate(runs, summary_paths(tmp_path / "summary"))
    t = report.load_tables(Path(out["runs"]).parent)
    caveat = findings.opencl_on_cpu(t["runs"])
    assert "every OpenCL or Vulkan device of this study is a CPU" in caveat
    assert "cost of the OpenCL or Vulkan path" in caveat


def test_caveat_absent_for_a_gpu(tmp_path):
    runs = [write_run(tmp_path, backend="opencl", placement="resident", transfer="copy",
                      kernel="baseline")]
    _set_device_type(runs[0], "gpu")
    out = aggregate.aggregate(runs, summary_paths(tmp_path / "summary"))
    assert findings.opencl_on_cpu(report.load_tables(Path(out["runs"]).parent)["runs"]) is None


def test_roofs_say_what_they_measure(built):
    paths, tables = built
    compute, memory = analysis.roof_labels(10.0, "float16", 10.5)
    assert "float16 vectors (16 float32 lanes, not half precision)" in compute
    assert "10 GFLOPS" in compute and "10.5 GB/s" in memory
    assert "read_float4" in memory and "not the host<->device copies" in memory
    assert analysis.vector_type_words("float") == "scalar float32"
    svg = paths["gemm_kernels"].with_suffix(".svg").read_text()
    assert "not half precision" in svg and "(float16)" not in svg
    html, md = paths["html"].read_text(), paths["md"].read_text()
    note = report.build.MEMORY_ROOF_NOTE
    assert str(markupsafe.escape(note)) in html and note in md


def test_points_above_the_roofline_are_named(built):
    paths, tables = built
    (note,) = analysis.roofline_notes(tables["gemm"], tables["peaks"])
    assert note.startswith("host: ") and "the runner's CPU backend" in note
    assert "not this device's peak" in note
    assert "tiled" not in note    # 3..9 GFLOPS: under both roofs
    assert f"Note: {note}." in paths["md"].read_text()
    assert f"Note: {markupsafe.escape(note)}." in paths["html"].read_text()


def test_no_note_when_every_point_is_under_the_roofs(built):
    _, tables = built
    peaks = tables["peaks"].copy()
    peaks.loc[peaks["kind"] == "compute", "gflops"] *= 100
    peaks.loc[peaks["kind"] == "bandwidth", "gbps"] *= 100
    assert analysis.roofline_notes(tables["gemm"], peaks) == []


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_written_files_get_the_umask_mode(tmp_path, umask_022):
    assert io.file_mode() == 0o644 and io.dir_mode() == 0o755
    f = io.write_json({"a": 1}, tmp_path / "run.json")
    assert stat.S_IMODE(f.stat().st_mode) == 0o644
    d = io.make_temp_dir(tmp_path, ".x-")
    assert stat.S_IMODE(d.stat().st_mode) == 0o755
    os.umask(0o027)
    assert stat.S_IMODE(io.write_text(tmp_path / "b.txt", "x").stat().st_mode) == 0o640


def test_report_files_share_the_figures_mode(tmp_path, umask_022):
    raw = tmp_path / "raw"
    inputs = standard_study(raw)
    out = aggregate.aggregate(inputs["runs"], summary_paths(tmp_path / "summary"),
                              bandwidth_csvs=inputs["bandwidth"], build_jsons=inputs["builds"])
    paths = report.build_report(tmp_path / "summary", report_paths(tmp_path / "report"))
    modes = {p.name: stat.S_IMODE(Path(p).stat().st_mode)
             for p in [*paths.values(), *out.values()]}
    assert set(modes.values()) == {0o644}, modes
