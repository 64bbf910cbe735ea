"""``phonetrain check``: the full check of a study's run folders (every ledger file's SHA-256
too), moving each finding aside so that the next ``snakemake all`` re-measures it
(:mod:`phonetrain.results.check`)."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import click

from phonetrain.cli.study import _sweep, require_study_folder, study_command
from phonetrain.errors import PhonetrainError


def study_runs(overrides: tuple[str, ...], conf_dir: str | None, results: str | None,
               must_exist: bool = False):
    """(the results folder's layout, the study's run params by (device, experiment), how many
    of them are measured there, the study's other outputs with their jobs' params), for
    :func:`phonetrain.stages.current.study_findings`. Raises
    :class:`click.ClickException` with the configuration error's message (a results folder
    that is a file among them), and (``must_exist``) for one that does not exist."""
    from phonetrain import layout
    from phonetrain.layout import Layout
    from phonetrain.stages.current import study_outputs
    from phonetrain.stages.params import job_params
    try:
        sweep = _sweep(overrides, conf_dir, results)
        require_study_folder(sweep.results_dir, overrides, conf_dir, results)
        L = Layout(sweep.results_dir)
        root = Path(L.root)   # not a file: the composition refuses that, naming the key
        if must_exist and not root.exists():
            raise click.ClickException(
                f"{root}: no such results folder, nothing to check; pass the folder the study "
                "wrote (results_dir=... or --results), or run it first (snakemake --cores 1 all)")
        jp = job_params(sweep)
        run_params = jp["run"]
        measured = sum(Path(L.run_dir(d, e), layout.RUN).exists() for d, e in run_params)
        return L, run_params, measured, study_outputs(sweep, jp)
    except PhonetrainError as e:
        raise click.ClickException(str(e)) from None


@contextmanager
def owning(L):
    """The results folder ``L.root`` owned by this command for the block
    (:func:`phonetrain.results.owner.take`): nothing is moved under a running workflow.
    Raises :class:`phonetrain.results.owner.ResultsFolderBusy` naming the holder."""
    from phonetrain.results import owner
    lock = owner.take(L)
    try:
        yield
    finally:
        lock.release()


@study_command("check")
@click.option("--dry-run", "-n", "dry_run", is_flag=True,
              help="Only list what would be moved aside.")
def check_command(overrides: tuple[str, ...], conf_dir: str | None, results: str | None,
                  dry_run: bool) -> None:
    """Check every measured run of the study (damaged, measured under other settings;
    contents by SHA-256; an unstable run is kept: `phonetrain refresh --unstable`) and every
    other output (made with other settings than its job's now), and move each finding aside
    into the results folder's quarantine/, so the next `snakemake all` makes it again.
    OVERRIDES are the Hydra overrides the study runs with (none for the default study)."""
    from phonetrain.results.check import quarantine
    from phonetrain.stages.current import study_findings
    L, run_params, measured, outputs = study_runs(overrides, conf_dir, results,
                                                  must_exist=True)
    if not measured:
        click.echo(f"{L.root}: no measured run of this study, nothing to check (pass the "
                   "overrides the study ran with; snakemake all measures every run)", err=True)
        return
    found = study_findings(run_params, L, outputs)
    if dry_run:
        for f in found:
            click.echo(f"would move aside {f.path}: {f.why}")
        click.echo(f"{len(found) or 'nothing'} to move aside (dry run: nothing moved)", err=True)
        return
    try:
        with owning(L):
            for f, dest in quarantine(found, L):
                click.echo(f"moved aside {f.path} -> {dest}: {f.why}")
    except PhonetrainError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"{len(found) or 'nothing'} moved aside; the next snakemake all measures "
               f"{'them' if found else 'nothing'} again", err=True)
