"""``phonetrain stale`` and ``phonetrain refresh``: what the next ``snakemake all`` does, and
asking for runs to be measured again by it.

``stale`` lists the check's findings (:mod:`phonetrain.results.check`: runs the workflow moves
aside at its start) and then Snakemake's own plan (a dry run with the same overrides), so the
two never disagree. ``refresh`` moves a run aside through the same mechanism.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import click

from phonetrain.cli.check import owning, study_runs
from phonetrain.cli.study import RESULTS, study_command
from phonetrain.errors import PhonetrainError


def snakefile(conf_dir: str | None) -> Path:
    """The workflow's Snakefile: beside the config folder (this checkout's by default)."""
    from phonetrain.config import CONF_DIR
    return Path(conf_dir or CONF_DIR).resolve().parent / "Snakefile"


def dry_run_command(overrides: list[str], conf_dir: str | None) -> list[str]:
    """The ``snakemake -n`` command line of the study (run from the working directory)."""
    return [sys.executable, "-m", "snakemake", "--dry-run", "--cores", "1",
            "--snakefile", str(snakefile(conf_dir)),
            "--config", f"overrides={json.dumps(overrides)}"]


def parse_dry_run(text: str) -> list[tuple[str, str, str]]:
    """The jobs of a Snakemake dry run's output, as (rule, output, reason); ``all`` left out
    (it has no output)."""
    jobs: list[list[str]] = []
    for line in text.splitlines():
        m = re.match(r"^(?:local)?rule (\w+):$", line)
        if m:
            jobs.append([m.group(1), "", ""])
            continue
        m = re.match(r"^\s+(output|reason): (.*)$", line)
        if m and jobs:
            jobs[-1][1 if m.group(1) == "output" else 2] = m.group(2)
    return [(r, o, why) for r, o, why in jobs if r != "all"]


def planned_jobs(overrides: list[str], conf_dir: str | None) -> list[tuple[str, str, str]]:
    """Snakemake's plan for the study (:func:`parse_dry_run` of its dry run). Raises
    :class:`click.ClickException` with Snakemake's last lines when the dry run fails."""
    p = subprocess.run(dry_run_command(overrides, conf_dir), capture_output=True, text=True)
    if p.returncode != 0:
        tail = "\n".join((p.stderr + p.stdout).strip().splitlines()[-15:])
        raise click.ClickException(f"snakemake --dry-run failed:\n{tail}")
    return parse_dry_run(p.stdout)


def damaged_tables(L) -> list[str]:
    """One line per file of the results folder ``L`` (a :class:`phonetrain.layout.Layout`)
    that the aggregate or report stage would stop on: a summary Parquet file, or the history
    ledger, that exists but is not a readable table of its schema
    (:func:`phonetrain.results.schema.read_table`), or a runs table without rows
    (:func:`phonetrain.results.schema.require_runs`); each line says what to do."""
    from phonetrain.results import schema
    from phonetrain.results.aggregate import read_ledger
    lines = []
    for t in schema.TABLES:
        p = Path(L.summary(t))
        if p.exists():
            try:
                df = schema.read_table(p, t)
                if t == "runs":  # one row per experiment of the study, failed ones too
                    schema.require_runs(df, p)
            except schema.SchemaError as e:
                lines.append(f"damaged {p}: {e.message}; the report stage stops on it and "
                             "snakemake all does not rewrite it while its inputs are unchanged: "
                             "delete it, and the next snakemake all aggregates again")
    try:
        read_ledger(L.history_ledger())
    except schema.SchemaError as e:
        lines.append(f"damaged {L.history_ledger()}: {e.message}; the next aggregation stops on "
                     f"it: {e.hint}")
    return lines


@study_command("stale")
def stale_command(overrides: tuple[str, ...], conf_dir: str | None,
                  results: str | None) -> None:
    """List what the next `snakemake all` does: the run folders its start moves aside to
    measure them again (damaged, measured under other settings; never an unstable run: `phonetrain
    refresh --unstable` asks for those) and the other outputs it moves aside to make them
    again (made with other settings than their jobs' now), then folders only
    `phonetrain check` moves (content that only SHA-256 tells apart), then every job
    Snakemake plans (rule, output, reason), from its own dry run. OVERRIDES are the Hydra
    overrides the study runs with (none for the default study); run it in the folder you
    run snakemake in."""
    from phonetrain.results.check import findings
    from phonetrain.stages.current import study_findings
    L, run_params, _, outputs = study_runs(overrides, conf_dir, results)
    found = study_findings(run_params, L, outputs, hashes=False)
    for f in found:
        click.echo(f"move aside {f.path}: {f.why}")
    damaged = damaged_tables(L)
    for line in damaged:
        click.echo(line)
    at_start = {f.path for f in found}
    for f in findings(run_params, L):
        if f.path not in at_start:  # content that only SHA-256 tells apart
            click.echo(f"check {f.path}: {f.why} (phonetrain check moves it aside; "
                       "snakemake all hashes no file and keeps it)")
    extra = [f"results_dir={results}"] if results else []
    jobs = planned_jobs(list(overrides) + extra, conf_dir)
    for rule, output, why in jobs:
        click.echo(f"{rule} {output}: {why}")
    click.echo(f"{len(found)} to move aside and re-measure, {len(jobs)} jobs planned "
               "(those moved aside are planned once moved)"
               + (f", {len(damaged)} damaged tables (listed above)" if damaged else ""), err=True)


@click.command("refresh")
@click.argument("runs", nargs=-1, metavar="[DEVICE/EXPERIMENT...]")
@click.option("--unstable", is_flag=True,
              help="Also every run whose measurement is unstable (measurement.json), e.g. "
                   "after the host was busy; the next snakemake all measures them again.")
@RESULTS
def refresh_command(runs: tuple[str, ...], unstable: bool, results: str | None) -> None:
    """Ask the next `snakemake all` to measure these runs again (e.g. `phonetrain refresh
    host/lenet5.opencl.baseline`; the ids of the report's tables), or with --unstable every run
    left unstable: each run folder is moved aside into the results folder's quarantine/, so its
    outputs are missing; nothing else reruns. A workflow run never re-measures an unstable run
    by itself (its train job already tried measure.max_attempts times)."""
    from phonetrain import layout
    from phonetrain.layout import Layout
    from phonetrain.results.check import move_aside, unstable_runs, utc_stamp
    L = Layout(results or "results")
    if not runs and not unstable:
        raise click.ClickException("name the runs to measure again (DEVICE/EXPERIMENT, e.g. "
                                   "host/lenet5.cpu.none) or pass --unstable")
    if not Path(L.root).is_dir():
        raise click.ClickException(
            f"{L.root}: no such results folder; pass the folder the study wrote (--results)")
    dirs = []
    for rid in dict.fromkeys(runs):  # a run named twice is moved once
        parts = rid.split("/")
        if len(parts) != 2 or any(p in ("", ".", "..") for p in parts):
            raise click.ClickException(
                f"{rid}: not a run id; name a run as DEVICE/EXPERIMENT, one '/' and no '..' "
                "(e.g. host/lenet5.cpu.none, as the report lists them); nothing was moved")
        device, exp = parts
        rdir = Path(L.run_dir(device, exp))
        if not (rdir / layout.RUN).exists():
            raise click.ClickException(
                f"{rid}: no measured run at {rdir}; name a run as DEVICE/EXPERIMENT (e.g. "
                "host/lenet5.cpu.none, as the report lists them) and pass --results for "
                "another results folder")
        dirs.append((rid, rdir, "asked by phonetrain refresh"))
    if unstable:
        named = {d.resolve() for _, d, _ in dirs}
        for f in unstable_runs(L):
            if Path(f.path).resolve() not in named:
                rid = "/".join(Path(f.path).parts[-2:])
                dirs.append((rid, Path(f.path), f"asked by phonetrain refresh --unstable ({f.why})"))
        if not dirs:
            click.echo(f"{L.root}: no unstable run, nothing moved", err=True)
            return
    stamp = utc_stamp()
    try:
        with owning(L):
            for rid, rdir, why in dirs:
                dest = move_aside(rdir, why, L, stamp)
                click.echo(f"{rid}: moved aside to {dest}; the next snakemake all measures "
                           "it again")
    except PhonetrainError as e:
        raise click.ClickException(str(e)) from None
