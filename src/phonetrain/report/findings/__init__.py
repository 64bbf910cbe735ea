"""The report's guidelines: findings computed from the Parquet tables, each one or two sentences
and one compact table, set beside the seed paper's figures (:mod:`phonetrain.report.paper`).

One module per topic: :mod:`.gpu_cpu`, :mod:`.time_split`, :mod:`.transfers`, :mod:`.gemm`,
:mod:`.bandwidth_sweep`, :mod:`.batch_memory`, :mod:`.accuracy`, :mod:`.energy_use`, over
:mod:`.base` (the :class:`Finding` and the run filters and verdicts they share).
:func:`all_findings` lists them in report order.

Every guideline function takes DataFrames as :func:`phonetrain.results.schema.read_table`
returns them and returns one :class:`Finding`. A finding whose inputs are absent says so
instead of guessing (``measured`` False). Its wording comes from
:mod:`phonetrain.report.wording` applied to the figure it states, and names the measure (host
clock, device events, call time). Trends and comparisons are per device: figures of
different devices are never set against each other. Row references read
``runs.parquet: <run_id>`` (or ``bandwidth.parquet: <device>/<kind>``,
``gemm.parquet: device=<device>``).
"""

from __future__ import annotations

import pandas as pd

from phonetrain.report.findings.accuracy import accuracy_first
from phonetrain.report.findings.bandwidth_sweep import bandwidth
from phonetrain.report.findings.base import (CONTENDED_ONLY, PAIR_SETTINGS, Finding, Table,
                                             opencl_on_cpu, run_verdict, unstable_as_ok,
                                             unstable_runs)
from phonetrain.report.findings.batch_memory import batch_size, memory
from phonetrain.report.findings.energy_use import energy
from phonetrain.report.findings.gemm import (gemm_throughput, kernel_optimization,
                                             optimization_gain)
from phonetrain.report.findings.gpu_cpu import best_pairs, gpu_cpu_pairs, gpu_vs_cpu, size_trend
from phonetrain.report.findings.time_split import (data_movement, launch_overhead,
                                                   movement_frame, moving)
from phonetrain.report.findings.transfers import (pair_frame, pipelining, placement,
                                                  transfer_method)

__all__ = ["CONTENDED_ONLY", "PAIR_SETTINGS", "Finding", "Table", "accuracy_first",
           "all_findings", "bandwidth", "batch_size", "best_pairs", "data_movement", "energy",
           "gemm_throughput", "gpu_cpu_pairs", "gpu_vs_cpu", "kernel_optimization",
           "launch_overhead", "memory", "movement_frame", "moving", "opencl_on_cpu",
           "optimization_gain", "pair_frame", "pipelining", "placement", "run_verdict",
           "size_trend", "transfer_method", "unstable_as_ok", "unstable_runs"]


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
