"""``phonetrain aggregate``, ``phonetrain report`` and ``phonetrain trace``: the results
stages by hand, on a results folder the workflow (or ``phonetrain run``) wrote.

Layout read (``results/``): ``runs/<device>/<experiment>/`` (params.json + runner outputs),
``bandwidth/<device>/bandwidth.csv``, ``build/<device>/kernels/<version>/build.json``,
``config/facts/<device>.json``, ``config/sweep.json``.
"""

from __future__ import annotations

from pathlib import Path

import click

RESULTS = click.option("--results", "results", type=click.Path(file_okay=False, path_type=Path),
                       default=Path("results"), show_default=True,
                       help="Results folder the workflow wrote.")


def discover(results: Path) -> dict[str, list[Path]]:
    """Inputs of :func:`phonetrain.results.aggregate.aggregate` found under ``results`` (sorted)."""
    return {"run_dirs": sorted(p.parent for p in results.glob("runs/*/*/params.json")),
            "bandwidth_csvs": sorted(results.glob("bandwidth/*/bandwidth.csv")),
            "build_jsons": sorted(results.glob("build/*/kernels/*/build.json"))}


@click.command("aggregate")
@RESULTS
def aggregate_command(results: Path) -> None:
    """Raw outputs under RESULTS -> RESULTS/summary/*.parquet (schema-checked)."""
    from phonetrain.results.aggregate import AggregateError, aggregate
    found = discover(results)
    if not found["run_dirs"]:
        raise click.ClickException(f"{results}/runs/*/*/params.json: no run folders; run "
                                   "the study (snakemake --cores 1 all) or `phonetrain run`")
    try:
        paths = aggregate(found.pop("run_dirs"), results / "summary", **found)
    except AggregateError as e:
        raise click.ClickException(str(e)) from None
    for table, path in paths.items():
        click.echo(f"{table:10s} {path}")


@click.command("report")
@RESULTS
def report_command(results: Path) -> None:
    """RESULTS/summary -> RESULTS/report/report.html, report.md and figures/."""
    from phonetrain.report import write_report
    from phonetrain.results.schema import SchemaError
    try:
        out = write_report(results / "summary", results / "report",
                           facts=sorted(results.glob("config/facts/*.json")),
                           sweep=results / "config" / "sweep.json")
    except (FileNotFoundError, SchemaError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"{out['html']}\n{out['md']}")


@click.command("trace")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
def trace_command(run_dir: Path) -> None:
    """RUN_DIR/trace.csv -> RUN_DIR/trace.perfetto.json (open it in ui.perfetto.dev)."""
    from phonetrain.results import aggregate
    from phonetrain.results import profiling
    try:
        trace = profiling.read_trace_csv(run_dir / "trace.csv")
        iters = aggregate.run_iterations(aggregate.read_json(run_dir / "run.json"),
                                         str(run_dir / "run.json"))
    except (profiling.TraceError, aggregate.AggregateError) as e:
        raise click.ClickException(str(e)) from None
    out = profiling.write_json_atomic(
        profiling.perfetto_trace(trace, iters, title=run_dir.name), run_dir / "trace.perfetto.json")
    click.echo(str(out))
