"""A report figure is one entry of phonetrain.report.registry.FIGURES plus its drawing
function and caption: the report's outputs, drawing and figure section all follow the
registry."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from helpers import REPO
from helpers.results import report_paths, standard_study, summary_paths
from phonetrain import report
from phonetrain.report import figures, registry
from phonetrain.results import aggregate


def runs_per_device(runs, path: Path, dpi: int = 120) -> Path:
    """A stand-in figure: the number of runs per device, as bars."""
    counts = runs.groupby("device").size()
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.bar(counts.index, counts.values)
    ax.set_ylabel("runs")
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def test_one_registry_entry_adds_a_figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(figures, "runs_per_device", runs_per_device, raising=False)
    monkeypatch.setitem(registry.FIGURES, "runs_per_device",
                        registry.Figure("Runs per device", "runs_per_device", ("runs",)))
    inputs = standard_study(tmp_path / "raw")
    aggregate.aggregate(inputs["runs"], summary_paths(tmp_path / "summary"),
                        bandwidth_csvs=inputs["bandwidth"], build_jsons=inputs["builds"])
    paths = report.build_report(tmp_path / "summary", report_paths(tmp_path / "report"))
    png = paths["runs_per_device"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000
    html = paths["html"].read_text()
    assert 'id="fig-runs_per_device"' in html and "Runs per device" in html
    assert "Runs per device" in paths["md"].read_text()


def test_every_registered_figure_has_its_function_and_caption():
    for name, fig in registry.FIGURES.items():
        assert callable(getattr(figures, fig.function, None)), (name, fig.function)
        assert (REPO / "rules" / "captions" / f"{name}.rst").is_file(), name


def test_the_report_rule_takes_its_figures_from_the_registry():
    text = (REPO / "rules" / "report.smk").read_text()
    assert "for name in FIGURES" in text
    assert not [n for n in registry.FIGURES if f'"{n}"' in text], "a figure named by hand"
