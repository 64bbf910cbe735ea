"""The report of a study shaped like the default one: every experiment of the default sweep (the
CPU backend, every OpenCL placement and kernel version, the Vulkan runs) as a run folder, then
aggregate and report. Guards the report against a new axis value that makes two rows of one
subject (a Vulkan run beside the OpenCL run of the same placement and kernel version)."""

from __future__ import annotations

from helpers.results import report_paths, summary_paths, write_run
from phonetrain.config import compose_sweep
from phonetrain.report import build
from phonetrain.results import aggregate


def test_a_study_of_the_default_sweeps_shape_aggregates_and_reports(tmp_path):
    sweep = compose_sweep()
    backends = {e.backend for e in sweep.experiments}
    assert {"cpu", "vulkan"} <= backends and len(backends) >= 4, backends
    raw, dirs = tmp_path / "raw", []
    for i, e in enumerate(sweep.experiments):
        b = e.config["backend"]
        dirs.append(write_run(raw, model=e.model, device=e.device, backend=e.backend,
                              placement=b.get("placement") or "none",
                              transfer=b.get("transfer") or "none", kernel=e.kernel,
                              unit_ns=50_000 + 10_000 * i))
    aggregate.aggregate(dirs, summary_paths(tmp_path / "summary"))
    out = build.build_report(tmp_path / "summary", report_paths(tmp_path / "report"))
    md = out["md"].read_text()
    assert "## At a glance" in md and "Vulkan resident/copy baseline" in md
    assert f"{len(dirs)} runs on host" in md
