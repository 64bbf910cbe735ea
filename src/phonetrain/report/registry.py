"""The report's figures, written once: name -> :class:`Figure`.

Everything that lists figures derives from :data:`FIGURES`: the files the report writes
(``figures/<name>.<fmt>`` and the other format beside it; :func:`phonetrain.layout.Layout.figure`),
the report rule's outputs (``rules/report.smk``), their captions
(``rules/captions/<name>.rst``, shown by ``snakemake --report``), the drawing
(:func:`phonetrain.report.build.draw_figures` calls the named function of
:mod:`phonetrain.report.figures`) and the report's figure section. Adding a figure is one
entry here, its function in ``figures.py`` and its caption file.

This module imports nothing, so the workflow reads it while it is parsed without loading
pandas or matplotlib.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    """One report figure. ``title`` heads it in the report; ``function`` is its drawing
    function in :mod:`phonetrain.report.figures`, called as ``function(*tables, path, dpi,
    *tables_after_dpi[, paper_reference=...])`` with the summary tables named in ``tables``
    and ``tables_after_dpi`` (``results/summary/<table>.parquet``: runs, iterations, commands,
    gemm, peaks, bandwidth); ``paper_reference``: it takes the report setting of that name
    (draw the seed paper's figures)."""

    title: str
    function: str
    tables: tuple[str, ...]
    tables_after_dpi: tuple[str, ...] = ()
    paper_reference: bool = False


FIGURES: dict[str, Figure] = {
    "iteration_time": Figure("Iteration time per device and model, CPU vs OpenCL, with intervals",
                             "iteration_time", ("runs",)),
    "breakdown": Figure("Where an iteration goes, per device and run", "breakdown",
                        ("runs", "iterations"), paper_reference=True),
    "gemm_gflops": Figure("GEMM throughput inside training, per device", "gemm_gflops",
                          ("runs", "commands"), paper_reference=True),
    "gemm_kernels": Figure("GEMM kernel versions vs the device's measured peaks (roofline)",
                           "gemm_kernels", ("gemm", "peaks")),
    "bandwidth": Figure("Transfers per device: GB/s of copies, time per call of every kind",
                        "bandwidth", ("bandwidth",), ("peaks",)),
    "loss": Figure("Loss curves per device and model", "loss_curves", ("runs", "iterations")),
    "accuracy": Figure("Held-out accuracy and training loss against wall time",
                       "accuracy_vs_time", ("runs", "iterations")),
    "batch_sweep": Figure("Time per sample and memory against batch size", "batch_sweep",
                          ("runs",)),
    "energy": Figure("Energy per training iteration, per device", "energy", ("runs",)),
    "memory_roles": Figure("Memory of a training step by role, per model and batch",
                           "memory_roles", ("runs",)),
}
