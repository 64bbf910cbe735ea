"""``phonetrain run``, ``aggregate``, ``report``, ``compare`` and ``trace``: a study's stages by
hand.

``run`` performs one experiment through the workflow's stages and files. ``aggregate`` and
``report`` compose the same config as the workflow (Hydra overrides as arguments) and call the
same functions as its aggregate and report rules, so they rebuild the same tables and report.
"""

from __future__ import annotations

from pathlib import Path

import click

from phonetrain.errors import PhonetrainError



def _no_options(ctx: click.Context, param: click.Parameter,
                value: tuple[str, ...]) -> tuple[str, ...]:
    """Refuse an unknown option that ``ignore_unknown_options`` passed on as an override (a
    Hydra override never starts with '-'): click's usage error names it and the options."""
    bad = [v for v in value if v.startswith("-")]
    if bad:
        opts = sorted(o for p in ctx.command.params if isinstance(p, click.Option)
                      for o in p.opts)
        raise click.UsageError(f"No such option: {bad[0]} (options: {', '.join(opts)}; "
                               "overrides are KEY=VALUE, e.g. measure.iterations=20)", ctx)
    return value


OVERRIDES = click.argument("overrides", nargs=-1, callback=_no_options)
CONF = click.option("--conf", "conf_dir", type=click.Path(file_okay=False), default=None,
                    help="Hydra config folder (default: conf/ of this checkout).")
RESULTS = click.option("--results", "results", type=click.Path(file_okay=False), default=None,
                       help="Results folder (the same as the override results_dir=...).")


def study_command(name: str, results: bool = True):
    """Decorator: the click command ``name`` over a study: Hydra override strings as
    arguments (:data:`OVERRIDES`, unknown options passed through to them), ``--conf``
    (:data:`CONF`) and, with ``results``, ``--results`` (:data:`RESULTS`)."""
    def wrap(f):
        f = CONF(RESULTS(f) if results else f)
        return click.command(name, context_settings={"ignore_unknown_options": True})(
            OVERRIDES(f))
    return wrap


def require_study_folder(results_dir: str, overrides: tuple[str, ...],
                         conf_dir: str | None, results: str | None = None) -> None:
    """Refuse to work in a folder that is neither a phonetrain checkout (a ``Snakefile`` and
    ``conf/config.yaml`` here) nor holds the study's results folder (``results_dir``,
    relative to the working folder) when the user named neither (``--conf``, ``--results``,
    ``results_dir=``): the command would report every run of an empty folder stale, or write a
    new ``results/`` where no study lives. Raises :class:`click.ClickException` with a hint."""
    from phonetrain.config import REPO_ROOT
    here = Path.cwd()
    named = conf_dir or results or any(o.startswith("results_dir=") for o in overrides)
    checkout = (here / "Snakefile").is_file() and (here / "conf" / "config.yaml").is_file()
    if named or checkout or Path(results_dir).exists():
        return
    raise click.ClickException(
        f"{here} is not a phonetrain checkout (no Snakefile and conf/ here) and holds no "
        f"{results_dir}/ folder; phonetrain reads and writes a study relative to the folder "
        f"snakemake runs in: cd {REPO_ROOT} (this phonetrain's checkout), or name the results "
        "folder (--results DIR or results_dir=DIR)")


def _sweep(overrides: tuple[str, ...], conf_dir: str | None, results: str | None):
    from phonetrain.config import CONF_DIR, compose_sweep
    extra = [f"results_dir={results}"] if results else []
    return compose_sweep(list(overrides) + extra, conf_dir or CONF_DIR)


@study_command("run", results=False)
def run_command(overrides: tuple[str, ...], conf_dir: str | None) -> None:
    """Run one experiment without Snakemake: OVERRIDES are Hydra overrides, e.g.
    `phonetrain run model=lenet5 device=host backend=opencl kernel=baseline
    measure.iterations=5`. Writes the same files as the workflow (results/runs/...), holding
    the results folder as a workflow does (refused while one runs there)."""
    from phonetrain.config import CONF_DIR, compose_one
    from phonetrain.io import read_json
    from phonetrain.layout import RUN, VERIFY, Layout
    from phonetrain.results import environment, owner
    from phonetrain.stages.single import run_single
    from phonetrain.stages.train import skipped_reason
    try:
        sweep, exp = compose_one(list(overrides), conf_dir or CONF_DIR)
        require_study_folder(sweep.results_dir, overrides, conf_dir)
        L = Layout(sweep.results_dir)
        environment.check(L, sweep.environment)
        lock = owner.take(L)  # never under a running workflow
        try:
            environment.record(L, sweep.environment)
            click.echo(f"phonetrain run: {exp.id} on {exp.device} (config "
                       f"{exp.config_hash})", err=True)
            rdir = run_single(sweep, exp)
        finally:
            lock.release()
        reason = skipped_reason(rdir / RUN)
        v = None if reason else read_json(rdir / VERIFY)
    except PhonetrainError as e:
        raise click.ClickException(str(e)) from None
    if reason:
        click.echo(f"{rdir}: {reason}")
        return
    click.echo(f"{rdir}: verify max_abs_err {v.get('max_abs_err'):.3g} "
               f"({'ok' if v.get('ok') else 'WRONG: its times are not valid'})")
    click.echo(timing_summary(rdir))


def timing_summary(rdir: Path) -> str:
    """What a run measured, in lines: its status (``ok``, ``wrong``, ``unstable`` with the
    reason: an unstable run's figures are shown for the record, marked, never hidden), the
    location estimate every comparison uses (``iteration_ms`` with its interval, by
    ``iteration_estimator``), the median with its spread (the interquartile range and the
    extremes over the measured iterations) and where the time went (the data-movement share and
    the per-iteration kernel and transfer medians; where they came from a process apart from
    the step's, a line saying so), plus the last held-out accuracy when the run
    evaluated (``measure.eval_every``), from the same rows the summary tables get
    (:func:`phonetrain.results.runs.read_run`). A run without measured iterations (skipped,
    out of memory, failed) gives one line: ``no timings: <status>: <reason>``."""
    import pandas as pd

    from phonetrain.results.runs import read_run
    row = read_run(rdir)["runs"].iloc[0]
    if not pd.notna(row["iteration_median_ms"]):
        return f"no timings: {row['status']}: {row['status_reason']}"
    mark = {"ok": "", "wrong": " (NOT VALID: verification failed)",
            "unstable": " (UNSTABLE: for the record only, not a number to compare)"}
    lines = [f"status: {row['status']}"
             + (f": {row['status_reason']}" if isinstance(row["status_reason"], str) else "")]
    tag = mark.get(row["status"], f" ({row['status']})")
    if pd.notna(row["iteration_ms"]):
        lines.append(f"iteration: {row['iteration_ms']:.3f} ms [{row['iteration_low_ms']:.3f}-"
                     f"{row['iteration_high_ms']:.3f}]{tag} ({row['iteration_estimator']}; "
                     f"attempts {_attempts(row)})")
    lines.append(f"iteration: median {row['iteration_median_ms']:.3f} ms over "
                 f"{int(row['iterations'])} measured iterations x {int(row['repeats'])} "
                 f"processes (p25-p75 {row['iteration_p25_ms']:.3f}-"
                 f"{row['iteration_p75_ms']:.3f} ms, min-max {row['iteration_min_ms']:.3f}-"
                 f"{row['iteration_max_ms']:.3f} ms){tag}")
    if not isinstance(row["placement"], str):
        lines.append("data movement: none (CPU backend: the data stays in host memory)")
    else:
        share = row["data_movement_share"]
        lines.append(f"data movement: {share:.1%} of the iteration time (per iteration: "
                     f"transfers {row['transfer_ms']:.3f} ms, kernels {row['kernel_ms']:.3f} "
                     "ms; medians)")
        if pd.notna(row["events_iteration_ms"]):
            lines.append("the iteration times above come from runner processes without "
                         "per-command events; the breakdown from one more process that "
                         f"recorded them (median {row['events_iteration_ms']:.3f} ms per "
                         "iteration with the events' host cost, taken off its gaps"
                         + (f", then scaled by {row['breakdown_scale']:.2f}"
                            if row["breakdown_scale"] < 1 else "") + ")")
    if pd.notna(row["heldout_accuracy_last"]):
        lines.append(f"held-out: accuracy {row['heldout_accuracy_last']:.1%}, loss "
                     f"{row['heldout_loss_last']:.4g} over {int(row['n_heldout'])} samples after "
                     "the last iteration (every evaluation in eval.json)")
    return "\n".join(lines)


def _attempts(row) -> str:
    """The runs row's ``attempts`` as text ("1" where the column is missing or null)."""
    import pandas as pd
    n = row.get("attempts")
    return str(int(n)) if n is not None and pd.notna(n) else "1"


@study_command("aggregate")
@click.option("--found", is_flag=True,
              help="Aggregate every run folder and device file found under the results "
                   "folder (after one-off `phonetrain run`s), not the configured study's.")
def aggregate_command(overrides: tuple[str, ...], conf_dir: str | None, results: str | None,
                      found: bool) -> None:
    """Raw outputs of the study -> its summary tables (the workflow's aggregate stage).
    OVERRIDES are the Hydra overrides the study ran with (none for the default study)."""
    from phonetrain.layout import Layout
    from phonetrain.stages.aggregate import aggregate_study
    from phonetrain.stages.params import expected_files, job_params, summary_outputs
    try:
        sweep = _sweep(overrides, conf_dir, results)
        L = Layout(sweep.results_dir)
        files = L.found() if found else expected_files(sweep)
        if not any(Path(d).exists() for d in files["runs"]):
            raise click.ClickException(
                f"{L.root}: no run folder of this study; run it first (snakemake --cores 1 "
                "all), pass the overrides it ran with, or --found after `phonetrain run`")
        paths = aggregate_study(None if found else job_params(sweep), L, files,
                                summary_outputs(sweep))
    except PhonetrainError as e:
        raise click.ClickException(str(e)) from None
    for table, path in paths.items():
        click.echo(f"{table:10s} {path}")


@study_command("report")
def report_command(overrides: tuple[str, ...], conf_dir: str | None,
                   results: str | None) -> None:
    """The study's summary tables -> report.html, report.md and figures/ (the workflow's
    report stage), with the report settings and device facts of the composed config."""
    from phonetrain.layout import Layout
    from phonetrain.results import schema
    from phonetrain.stages.aggregate import report_study
    from phonetrain.stages.params import facts
    try:
        sweep = _sweep(overrides, conf_dir, results)
        if not Path(sweep.results_dir).is_dir():
            raise click.ClickException(
                f"results folder {Path(sweep.results_dir).resolve()} does not exist: "
                "name the folder a study wrote (--results DIR or "
                "results_dir=DIR, with the overrides it ran with), or run the study first "
                "(snakemake --cores 1 all)")
        L = Layout(sweep.results_dir)
        if Path(L.summary("runs")).is_file():  # a study's runs table has rows
            schema.require_runs(schema.read_table(L.summary("runs"), "runs"), L.summary("runs"))
        out = report_study(L, sweep.root["report"], facts(sweep))
    except (PhonetrainError, FileNotFoundError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"{out['html']}\n{out['md']}")


@click.command("compare")
@click.argument("results_a", type=click.Path(file_okay=False))
@click.argument("results_b", type=click.Path(file_okay=False))
def compare_command(results_a: str, results_b: str) -> None:
    """Set two results folders side by side (two phones, two branches): for every run and GEMM
    shape measured in both, A's and B's estimate with its interval and conditions, B / A, the
    verdict (faster or slower only when both are usable and the intervals separate, else
    "cannot tell" with the reason) and what differs (source files, tuning choices). Runs and
    shapes identical on both sides are counted, not listed. Reads RESULTS/summary/*.parquet
    (run `phonetrain aggregate` there first); a runs table without rows beside one with rows
    is refused as damaged."""
    from phonetrain.layout import Layout
    from phonetrain.report import load_tables
    from phonetrain.report.changes import compare, text_table
    from phonetrain.results import schema
    for r in (results_a, results_b):
        if not Path(r).is_dir():
            raise click.ClickException(f"{r}: no such folder, so no {Layout(r).summary('runs')};"
                                       " give a results folder (a study's results_dir)")
    try:
        a, b = (load_tables(Layout(r).summary_dir()) for r in (results_a, results_b))
        for r, mine, other in ((results_a, a, b), (results_b, b, a)):
            if len(other["runs"]):  # a side without runs is compared with one that has runs
                schema.require_runs(mine["runs"], Layout(r).summary("runs"))
        changes = compare(a, b, (results_a, results_b))
    except (PhonetrainError, FileNotFoundError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"A = {results_a}, B = {results_b}; estimates in ms [interval] (runs: "
               "iteration time, host clock, by the runs' estimator; GEMM: kernel time); a "
               "verdict only where both sides are usable and the intervals separate")
    click.echo(text_table(changes, "A", "B"))


@click.command("trace")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
def trace_command(run_dir: Path) -> None:
    """RUN_DIR/trace.csv -> RUN_DIR/trace.perfetto.json (open it in ui.perfetto.dev); the
    trace of RUN_DIR/events/ where the run's step time came from processes without events."""
    from phonetrain import layout
    from phonetrain.io import read_json
    from phonetrain.results import profiling
    from phonetrain.results.runs import folder_problems, run_iterations, traced_process
    if not (run_dir / layout.RUN).is_file():
        where = layout.Layout("RESULTS").run_dir("<device>", "<experiment>")
        raise click.ClickException(f"{run_dir}: not a run folder (no {layout.RUN}); name one "
                                   f"run's folder, {where}")
    problems = folder_problems(run_dir)
    if problems:
        raise click.ClickException(f"{run_dir} is damaged, not a measurement: "
                                   f"{'; '.join(problems)}; measure it again (phonetrain "
                                   "refresh, then snakemake all)")
    traced = traced_process(run_dir)   # events/ where the step ran without events
    try:
        if not (traced / layout.TRACE).is_file():
            status = read_json(traced / layout.RUN).get("status", "?")
            raise click.ClickException(
                f"{run_dir}: no {layout.TRACE}: the run's status is {status!r} (a skipped or "
                f"failed run measured nothing; why: its {layout.RUN}"
                + (f" and {layout.FAILED}" if (run_dir / layout.FAILED).is_file() else "")
                + ", or the report's tables)")
        trace = profiling.read_trace_csv(traced / layout.TRACE)
        iters = run_iterations(read_json(traced / layout.RUN), str(traced / layout.RUN))
    except PhonetrainError as e:
        raise click.ClickException(str(e)) from None
    out = profiling.write_json_atomic(profiling.perfetto_trace(trace, iters, title=run_dir.name),
                                      run_dir / layout.PERFETTO)
    click.echo(str(out))
