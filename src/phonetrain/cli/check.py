"""``phonetrain check``: the full check of a study's run folders (every ledger file's SHA-256
too), moving each finding aside so that the next ``snakemake all`` re-measures it
(:mod:`phonetrain.results.check`)."""

from __future__ import annotations

import click

from phonetrain.cli.study import CONF, OVERRIDES, RESULTS, _sweep
from phonetrain.errors import PhonetrainError


def study_findings(overrides: tuple[str, ...], conf_dir: str | None, results: str | None,
                   hashes: bool = True):
    """(the results folder's layout, the check's findings) of the study (``hashes`` False:
    the check at workflow start, without SHA-256). Raises :class:`click.ClickException` with
    the configuration error's message."""
    from phonetrain.layout import Layout
    from phonetrain.results.check import findings
    from phonetrain.stages.params import job_params
    try:
        sweep = _sweep(overrides, conf_dir, results)
        L = Layout(sweep.results_dir)
        return L, findings(job_params(sweep)["run"], L, hashes=hashes)
    except PhonetrainError as e:
        raise click.ClickException(str(e)) from None


@click.command("check", context_settings={"ignore_unknown_options": True})
@OVERRIDES
@CONF
@RESULTS
@click.option("--dry-run", "-n", "dry_run", is_flag=True,
              help="Only list what would be moved aside.")
def check_command(overrides: tuple[str, ...], conf_dir: str | None, results: str | None,
                  dry_run: bool) -> None:
    """Check every measured run of the study (damaged, measured under other settings,
    unstable; contents by SHA-256) and move each finding aside into the results folder's
    quarantine/, so the next `snakemake all` measures it again. OVERRIDES are the Hydra
    overrides the study runs with (none for the default study)."""
    from phonetrain.results.check import quarantine
    L, found = study_findings(overrides, conf_dir, results)
    if dry_run:
        for f in found:
            click.echo(f"would move aside {f.path}: {f.why}")
        click.echo(f"{len(found) or 'nothing'} to move aside (dry run: nothing moved)", err=True)
        return
    for f, dest in zip(found, quarantine(found, L)):
        click.echo(f"moved aside {f.path} -> {dest}: {f.why}")
    click.echo(f"{len(found) or 'nothing'} moved aside; the next snakemake all measures "
               f"{'them' if found else 'nothing'} again", err=True)
