"""``phonetrain stale`` and ``phonetrain refresh``: what of a study is not current, and asking
for one run to be measured again by the next ``snakemake all``."""

from __future__ import annotations

from pathlib import Path

import click

from phonetrain.cli.study import CONF, OVERRIDES, RESULTS, _sweep
from phonetrain.errors import PhonetrainError


@click.command("stale", context_settings={"ignore_unknown_options": True})
@OVERRIDES
@CONF
@RESULTS
def stale_command(overrides: tuple[str, ...], conf_dir: str | None,
                  results: str | None) -> None:
    """List what of the study is not a current result, and why: runs the next `snakemake
    all` re-measures (damaged, measured under other settings, marked out of date, refresh
    asked) or that were never measured, kernel builds, GEMM sweeps, peaks and bandwidth
    sweeps that failed or are left from older inputs, a partial summary or report. OVERRIDES
    are the Hydra overrides the study runs with (none for the default study)."""
    from phonetrain.stages.current import stale
    try:
        rows = stale(_sweep(overrides, conf_dir, results))
    except PhonetrainError as e:
        raise click.ClickException(str(e)) from None
    for path, why in rows:
        click.echo(f"{path}: {why}")
    click.echo(f"{len(rows) or 'nothing'} stale; jobs whose source files changed are listed, "
               "with the reason, by a dry run: snakemake -n all (with the study's --config)",
               err=True)


@click.command("refresh")
@click.argument("runs", nargs=-1, required=True, metavar="DEVICE/EXPERIMENT...")
@RESULTS
def refresh_command(runs: tuple[str, ...], results: str | None) -> None:
    """Ask the next `snakemake all` to measure these runs again (e.g. `phonetrain refresh
    host/lenet5.opencl.baseline`; the ids of the report's tables); nothing else reruns."""
    from phonetrain import layout
    from phonetrain.io import write_json
    from phonetrain.layout import Layout
    L = Layout(results or "results")
    for rid in runs:
        device, _, exp = rid.partition("/")
        rdir = Path(L.run_dir(device, exp))
        if not exp or not (rdir / layout.RUN).exists():
            raise click.ClickException(
                f"{rid}: no measured run at {rdir}; name a run as DEVICE/EXPERIMENT (e.g. "
                "host/lenet5.cpu.none, as the report lists them) and pass --results for "
                "another results folder")
        write_json({"reason": "asked by phonetrain refresh"}, rdir / layout.REFRESH)
        click.echo(f"{rid}: the next snakemake all measures it again")
