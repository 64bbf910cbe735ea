"""Figures that scale and that a person can read: every figure drawn for 1 and 8 devices (five
kernel versions in the runs, ten in the GEMM sweep) and for a two-device study shaped like the
default one (two models, five kernel versions, a GEMM sweep of the models' 18 shapes and six
squares) with no two labels overlapping, every legend outside the data, one panel per device,
no panel squeezed below :data:`MIN_PANEL_SHARE` of its share of the figure's width, and the
SVG written beside the PNG; on a busy host (every run unstable) the breakdown figures draw
the unstable runs' shares, hatched and labelled."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.backends.backend_agg import FigureCanvasAgg
import numpy as np
import pytest

from helpers.results import (mark_unstable, multi_device_study, summary_paths, write_gemm_versions,
                             write_run)
from phonetrain import report
from phonetrain.report import build, figures, glance, wording
from phonetrain.results import aggregate, schema

DEVICES = [f"phone{i}" for i in range(8)]
RUN_KERNELS = ["baseline", "tiled", "regblock", "clblast", "image"]
GEMM_KERNELS = RUN_KERNELS + ["v6", "v7", "v8", "v9", "v10"]
TWO = ["host", "pixel7"]
# the GEMM shapes of a default study: the MLP's and LeNet-5's forward (nn) and backward (nt,
# tn) products at batch 32, then the sweep's squares
STUDY_SHAPES = [("gemm_nn", 32, 256, 784), ("gemm_nn", 32, 128, 256), ("gemm_nn", 32, 16, 128),
                ("gemm_nt", 32, 784, 256), ("gemm_nt", 32, 256, 128), ("gemm_nt", 32, 128, 16),
                ("gemm_tn", 784, 256, 32), ("gemm_tn", 256, 128, 32), ("gemm_tn", 128, 16, 32),
                ("gemm_nn", 6, 576, 25), ("gemm_nn", 16, 64, 150), ("gemm_nn", 32, 120, 256),
                ("gemm_nn", 32, 84, 120), ("gemm_nn", 32, 10, 84), ("gemm_tn", 25, 6, 576),
                ("gemm_tn", 150, 16, 64), ("gemm_nt", 576, 25, 6), ("gemm_nt", 64, 150, 16),
                *[("gemm_nn", n, n, n) for n in (64, 128, 256, 512, 1024, 2048)]]
# a panel keeps at least this share of its column's width of the saved figure (legends, notes
# and labels may take the rest); a legend drawn beside a panel that squeezes it fails
MIN_PANEL_SHARE = 0.5


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


def _check_widths(fig, what: str) -> None:
    """Every panel (an axes with its axis on) at least :data:`MIN_PANEL_SHARE` of the saved
    (tight) figure's width divided by the panels across its grid."""
    r = fig.canvas.get_renderer()
    full = fig.get_tightbbox(r).width * fig.dpi
    for ax in (a for a in fig.axes if a.axison):
        ncols = ax.get_subplotspec().get_gridspec().ncols
        share = ax.get_window_extent(r).width / (full / ncols)
        assert share >= MIN_PANEL_SHARE, \
            f"{what}: panel {ax.get_title()!r} is {share:.0%} of its column's width"


def _overlapping_pairs(boxes: list, tol: float = 1.0) -> list[tuple[int, int]]:
    """Every pair ``i < j`` of ``boxes`` that :func:`_overlap` says overlap, in the order of
    ``itertools.combinations``; one array operation instead of a call per pair (an 8-device
    figure has thousands of labels)."""
    if len(boxes) < 2:
        return []
    x0, y0, x1, y1 = np.array([[b.x0, b.y0, b.x1, b.y1] for b in boxes]).T
    w = np.minimum.outer(x1, x1) - np.maximum.outer(x0, x0)
    h = np.minimum.outer(y1, y1) - np.maximum.outer(y0, y0)
    return [(int(i), int(j)) for i, j in np.argwhere(np.triu((w > tol) & (h > tol), 1))]


def _check(fig, what: str) -> None:
    texts, legends, data = _boxes(fig)
    _check_widths(fig, what)
    clashes = [(texts[i][0].get_text(), texts[j][0].get_text())
               for i, j in _overlapping_pairs([b for _, b in texts])]
    title = fig._suptitle.get_text() if fig._suptitle is not None else "no title"
    assert not clashes, f"{what} ({title}): overlapping labels {clashes[:5]}"
    inside = [i for i, lb in enumerate(legends) for db in data if _overlap(lb, db)]
    assert not inside, f"{what}: a legend covers the data"


def _says_no_data(fig) -> bool:
    """A figure drawn by ``figures._no_data``: one text that starts with "no data:"."""
    return any(t.get_text().startswith("no data:") for ax in fig.axes for t in ax.texts)


def _draw(name: str, t: dict, path: Path, save: bool = True):
    """Every figure of ``t``, each checked; written to files only with ``save`` (rendering
    the pixels of eight devices' panels costs minutes and proves nothing of their layout).
    A saved figure is checked as saved: ``figures._save`` lays it out and fixes that layout,
    so the check reads the files' layout without laying the figure out again."""
    drawn = []
    orig = figures._save

    def save_and_check(fig, p, dpi):
        drawn.append(fig)
        if save:
            out = orig(fig, p, dpi)
            FigureCanvasAgg(fig)   # closing it took its canvas: Agg's text metrics, as saved
        _check(fig, f"{name} {path.stem}")
        plt.close(fig)
        return out if save else p
    figures._save = save_and_check
    try:
        build.draw_figures(t, {n: path.parent / f"{n}.{path.stem}.png" for n in build.FIGURES})
    finally:
        figures._save = orig
    return drawn


def _draw_one(fn, *args):
    """The figure ``fn(*args, path)`` draws, unchecked and unsaved."""
    drawn = []
    orig = figures._save
    figures._save = lambda fig, p, dpi: (drawn.append(fig), p)[1]
    try:
        fn(*args)
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
    labels = [t.get_text().replace("\n", " ") for ax in drawn[0].axes if ax.get_legend()
              for t in ax.get_legend().get_texts()]
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


@pytest.fixture(scope="module")
def two_devices(tmp_path_factory) -> dict:
    """A two-device study shaped like the default one: two models, five kernel versions,
    every run evaluated and measured energy, and a GEMM sweep of :data:`STUDY_SHAPES`."""
    root = tmp_path_factory.mktemp("two")
    inputs = multi_device_study(root / "raw", TWO, RUN_KERNELS, measured_all=True)
    gemm = [p for d in TWO for p in write_gemm_versions(root / "gemm-raw", d, RUN_KERNELS,
                                                        shapes=STUDY_SHAPES)]
    aggregate.aggregate(inputs["runs"], summary_paths(root / "summary"),
                        bandwidth_csvs=inputs["bandwidth"], build_jsons=inputs["builds"],
                        gemm_jsons=gemm, peaks_jsons=inputs["peaks"])
    return report.load_tables(root / "summary")


def test_every_figure_of_a_two_device_study_is_readable(two_devices, tmp_path):
    drawn = _draw("two", two_devices, tmp_path / "two", save=False)
    assert len(drawn) == len(build.FIGURES)
    kernels = next(f for f in drawn if f._suptitle.get_text().startswith("GEMM kernel"))
    shown = [t.get_text() for t in _drawn_ticks(kernels.axes[0].xaxis, 0) if t.get_text()]
    # 24 shapes of three GEMM variants: every one labelled, or every other one at most
    assert len(shown) >= len(STUDY_SHAPES) // 2 and "gemm_tn 784x256x32" in shown


def test_the_width_check_fails_on_a_panel_squeezed_by_its_legend():
    fig, axes = figures._panels([2.0], 2, width=8.0)
    for ax in axes[0]:
        ax.plot([1, 2], [1, 2], label="compute roof 50 GFLOPS: OpenCL mad() chains on float4 "
                "vectors, 4 float32 lanes, not half precision (bench-peak, best width)")
    axes[0, 0].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
    fig.draw_without_rendering()
    with pytest.raises(AssertionError, match="of its column's width"):
        _check_widths(fig, "planted")
    plt.close(fig)


def test_breakdown_figures_draw_unstable_runs_on_a_busy_host(tmp_path):
    """Every run unstable (other processes took 60% of the CPU): At a glance decides the
    data-movement share under contention, and both breakdown figures draw those runs' shares,
    hatched and labelled, instead of "no data"."""
    raw = tmp_path / "raw"
    dirs = [write_run(raw, backend="cpu"),
            write_run(raw, backend="opencl_staged", placement="staged", transfer="copy",
                      kernel="baseline", kernel_ns=1_000, unit_ns=300_000)]
    for d in dirs:
        est = json.loads((d / "run.json").read_text())["iters"][-1]["wall_ms"]
        mark_unstable(d, "other processes used 60% of the CPU", est * 0.8, est * 1.2,
                      other_cpu_share=0.6)
    aggregate.aggregate(dirs, summary_paths(tmp_path / "s"))
    t = report.load_tables(tmp_path / "s")
    assert set(t["runs"]["status"]) == {"unstable"}
    share = next(r for r in glance.at_a_glance(t)["host"]
                 if r.finding == "Share of data movement (device events)")
    assert share.verdict == f"agrees ({wording.UNDER_CONTENTION})"
    for fn, args in ((figures.breakdown, (t["runs"], t["iterations"])),
                     (figures.gemm_gflops, (t["runs"], t["commands"]))):
        fig, = _draw_one(fn, *args, tmp_path / f"{fn.__name__}.png")
        assert not _says_no_data(fig), fn.__name__
        bars = [p for ax in fig.axes for c in ax.containers for p in c if p.get_width() > 0]
        assert bars and {p.get_hatch() for p in bars} == {figures.UNSTABLE_HATCH}
        values = [x.get_text() for ax in fig.axes for x in ax.texts]
        assert values and all(v.endswith("(unstable)") for v in values), values
        assert any("unstable run" in x.get_text() for x in fig.legends[0].get_texts())
        plt.close(fig)


def test_the_overlap_search_finds_exactly_the_overlapping_pairs():
    """:func:`_overlapping_pairs` is :func:`_overlap` over every pair: planted boxes that
    overlap by more than the tolerance, touch, or overlap by less than it."""
    from matplotlib.transforms import Bbox
    rng = np.random.default_rng(0)
    boxes = [Bbox.from_bounds(*rng.uniform(0, 100, 2), *rng.uniform(0.5, 30, 2))
             for _ in range(60)]
    boxes += [Bbox.from_extents(0, 0, 10, 10), Bbox.from_extents(10, 0, 20, 10),   # touch
              Bbox.from_extents(9.5, 0, 20, 10), Bbox.from_extents(8, 8, 20, 20)]  # < tol, > tol
    expected = [(i, j) for i, j in itertools.combinations(range(len(boxes)), 2)
                if _overlap(boxes[i], boxes[j])]
    assert _overlapping_pairs(boxes) == expected and len(expected) > 10
    assert (60, 63) in expected and (60, 61) not in expected and (60, 62) not in expected
