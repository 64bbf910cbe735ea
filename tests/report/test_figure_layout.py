"""Figures that scale: every figure drawn for 1 and 8 devices (five kernel versions in the
runs, ten in the GEMM sweep) with no two labels overlapping, every legend outside the data,
one panel per device, and the SVG written beside the PNG."""

from __future__ import annotations

import itertools
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from helpers.results import multi_device_study, summary_paths, write_gemm_versions
from phonetrain import report
from phonetrain.report import build, figures
from phonetrain.results import aggregate, schema

DEVICES = [f"phone{i}" for i in range(8)]
RUN_KERNELS = ["baseline", "tiled", "regblock", "clblast", "image"]
GEMM_KERNELS = RUN_KERNELS + ["v6", "v7", "v8", "v9", "v10"]


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict:
    """An 8-device study of hand-built run folders (one model, five kernel versions; every
    run evaluated held-out accuracy and measured energy) and a GEMM sweep of ten versions
    per device."""
    root = tmp_path_factory.mktemp("eight")
    inputs = multi_device_study(root / "raw", DEVICES, RUN_KERNELS,
                                models=("mlp_784_256_128_16",), measured_all=True)
    gemm = [p for d in DEVICES for p in write_gemm_versions(root / "gemm-raw", d, GEMM_KERNELS)]
    aggregate.aggregate(inputs["runs"], summary_paths(root / "summary"),
                        bandwidth_csvs=inputs["bandwidth"], build_jsons=inputs["builds"],
                        gemm_jsons=gemm, peaks_jsons=inputs["peaks"])
    return report.load_tables(root / "summary")


def _subset(tables: dict, devices: list[str]) -> dict:
    return {t: (df[df["device"].isin(devices)] if "device" in df else df)
            for t, df in tables.items()}


def _drawn_ticks(axis, coord: int) -> list:
    """The tick labels of ``axis`` inside its view interval (the ones drawn)."""
    lo, hi = sorted(axis.get_view_interval())
    return [t for t in axis.get_ticklabels()
            if lo - 1e-9 * abs(lo) <= t.get_position()[coord] <= hi + 1e-9 * abs(hi)]


def _boxes(fig) -> tuple[list, list, list]:
    """(texts with their window boxes, legend boxes, data-area boxes) of a figure, laid out
    as saving it would lay it out (no pixels rendered)."""
    fig.draw_without_rendering()
    r = fig.canvas.get_renderer()
    texts = []
    for ax in fig.axes:
        items = [*_drawn_ticks(ax.xaxis, 0), *_drawn_ticks(ax.yaxis, 1), *ax.texts, ax.title,
                 ax.xaxis.label, ax.yaxis.label]
        if ax.get_legend():
            items += ax.get_legend().get_texts()
        texts += [t for t in items if t.get_visible() and t.get_text().strip()]
    for leg in fig.legends:
        texts += list(leg.get_texts())
    texts += [t for t in fig.texts if t.get_text().strip()]
    if fig._suptitle is not None and fig._suptitle not in texts:
        texts.append(fig._suptitle)
    legends = [leg.get_window_extent(r) for leg in fig.legends] + \
        [ax.get_legend().get_window_extent(r) for ax in fig.axes if ax.get_legend()]
    data = [ax.get_window_extent(r) for ax in fig.axes if ax.axison]
    return [(t, t.get_window_extent(r)) for t in texts], legends, data


def _overlap(a, b, tol: float = 1.0) -> bool:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w > tol and h > tol


def _check(fig, what: str) -> None:
    texts, legends, data = _boxes(fig)
    clashes = [(a.get_text(), b.get_text()) for (a, ba), (b, bb) in
               itertools.combinations(texts, 2) if _overlap(ba, bb)]
    title = fig._suptitle.get_text() if fig._suptitle is not None else "no title"
    assert not clashes, f"{what} ({title}): overlapping labels {clashes[:5]}"
    inside = [i for i, lb in enumerate(legends) for db in data if _overlap(lb, db)]
    assert not inside, f"{what}: a legend covers the data"


def _says_no_data(fig) -> bool:
    """A figure drawn by ``figures._no_data``: one text that starts with "no data:"."""
    return any(t.get_text().startswith("no data:") for ax in fig.axes for t in ax.texts)


def _draw(name: str, t: dict, path: Path, save: bool = True):
    """Every figure of ``t``, each checked; written to files only with ``save`` (rendering
    the pixels of eight devices' panels costs minutes and proves nothing of their layout)."""
    drawn = []
    orig = figures._save
    figures._save = lambda fig, p, dpi: (drawn.append(fig), _check(fig, f"{name} {path.stem}"),
                                         orig(fig, p, dpi) if save else (plt.close(fig), p)[1])[2]
    try:
        build.draw_figures(t, {n: path.parent / f"{n}.{path.stem}.png" for n in build.FIGURES})
    finally:
        figures._save = orig
    return drawn


@pytest.mark.parametrize("n", [1, 8])  # one device, and the most the layout is built for
def test_every_figure_is_legible_with_n_devices(tables, tmp_path, n):
    devices = DEVICES[:n]
    drawn = _draw("all", _subset(tables, devices), tmp_path / f"d{n}", save=n == 1)
    assert len(drawn) == len(build.FIGURES)
    # every figure has data here (held-out evaluations and energy included) but the batch
    # sweep: one batch size per model, so that figure only says so
    empty = [f for f in drawn if _says_no_data(f)]
    assert len(empty) == 1 and "sweep.batches" in empty[0].axes[0].texts[0].get_text()
    for fig in (f for f in drawn if not _says_no_data(f)):   # a panel (or row) per device
        titled = {d for d in devices for ax in fig.axes if ax.get_title().startswith(d)}
        assert titled == set(devices), fig._suptitle.get_text()
    for name in build.FIGURES if n == 1 else ():
        png = tmp_path / f"{name}.d{n}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert png.with_suffix(".svg").read_text().lstrip().startswith("<?xml")


def test_ten_kernel_versions_get_ten_distinct_styles(tables, tmp_path):
    drawn = []
    orig = figures._save
    figures._save = lambda fig, p, dpi: (drawn.append(fig), orig(fig, p, dpi))[1]
    try:
        figures.gemm_kernels(_subset(tables, DEVICES[:1])["gemm"],
                             tables["peaks"], tmp_path / "g.png")
    finally:
        figures._save = orig
    lines = [ln for ln in drawn[0].axes[0].get_lines() if ln.get_label() in GEMM_KERNELS]
    assert len(lines) == 10
    assert len({(ln.get_color(), ln.get_marker()) for ln in lines}) == 10
    labels = [t.get_text() for t in drawn[0].axes[1].get_legend().get_texts()]
    assert any(t.startswith("memory roof 10.5 GB/s: an OpenCL kernel reading device memory")
               for t in labels)
    assert any(t.startswith("compute roof 50 GFLOPS: OpenCL mad() chains on float4 vectors")
               for t in labels)


def test_breakdown_legend_lists_only_what_is_drawn(tmp_path):
    t = {name: schema.empty(name) for name in schema.TABLES}
    from helpers.results import write_run
    d = write_run(tmp_path / "raw", backend="opencl", placement="resident", transfer="copy",
                  kernel="baseline")
    aggregate.aggregate([d], summary_paths(tmp_path / "s"))
    t = report.load_tables(tmp_path / "s")
    seen = []
    orig = figures._save
    figures._save = lambda fig, p, dpi: (seen.extend(x.get_text() for x in
                                                     fig.legends[0].get_texts()),
                                         orig(fig, p, dpi))[1]
    try:
        figures.breakdown(t["runs"], t["iterations"], tmp_path / "b.png")
    finally:
        figures._save = orig
    assert "map/unmap" not in seen and "h2d" in seen and "kernel" in seen
