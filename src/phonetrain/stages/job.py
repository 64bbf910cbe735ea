"""One workflow job: its named input and output files, its params, its log, the run-time knobs.

The rules run every stage as ``python -m phonetrain.stages.<module> <stage> --log LOG
--params JSON --input NAME=PATH [PATH...] --output NAME=PATH ... [--expect JSON]``: a light
process per job
(a Snakemake ``run:`` job would re-parse the workflow), whose stage function receives a
:class:`Job` and takes its files by name, as Snakemake scripts do (``job.input.runner``,
``job.output.run``); it never rebuilds another rule's path. ``--expect`` maps each input
made by another job to the hash of the settings the workflow expects it to record
(:mod:`phonetrain.stages.stamp`); :func:`run` checks them before the stage starts. The job's
log records its span (:func:`ok_line`), the device locks it held, and each wait and runner
process (:mod:`phonetrain.spans`), from which :mod:`phonetrain.stages.cost` reads the study's
cost.
``phonetrain run`` builds the same jobs from :mod:`phonetrain.layout` and calls the same
functions in-process.

Run-time knobs (how long a runner may run, whether it prints progress) are not params: a
change must rerun nothing. They reach a job through the environment variable
:data:`RUNTIME_ENV` (JSON), which the workflow sets when it composes the sweep, with the
results folder as this invocation spells it: params hold paths relative to it
(:meth:`Runtime.at`), so they do not change with its spelling.

The command names its interpreter by the variable :data:`PYTHON_ENV` (``"$PHONETRAIN_PYTHON"
-m phonetrain.stages...``), which the workflow sets to the interpreter that parsed it (each
Snakemake process parses the workflow, also a cluster job's own): the command text, which
Snakemake's code-change trigger compares, does not spell where the virtual environment lives,
so a recreated environment or a moved checkout reruns nothing.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Mapping, Sequence

from phonetrain import spans
from phonetrain.devices import locks
from phonetrain.errors import PhonetrainError, StageError
from phonetrain.io import write_text
from phonetrain.stages import specs
from phonetrain.stages.specs import S
from phonetrain.stages.stamp import check_inputs

RUNTIME_ENV = "PHONETRAIN_RUNTIME"
PYTHON_ENV = "PHONETRAIN_PYTHON"   # the interpreter a job command runs (set by the workflow)


@dataclass(frozen=True)
class Runtime:
    """Run-time knobs: ``timeout_s`` (limit of one runner invocation, s; ``measure.timeout_s``),
    ``progress`` (the runner prints one line per iteration; ``measure.progress``) and
    ``results_dir`` (the results folder as spelled now; ``results_dir``)."""

    timeout_s: float
    progress: bool
    results_dir: str

    @classmethod
    def from_env(cls) -> Runtime:
        """The knobs of :data:`RUNTIME_ENV`; where unset, the config's defaults."""
        from phonetrain.config import Config, MeasureConfig  # only when no workflow set them

        doc = json.loads(os.environ.get(RUNTIME_ENV) or "{}")
        defaults = {"timeout_s": MeasureConfig.timeout_s, "progress": MeasureConfig.progress,
                    "results_dir": Config.results_dir}
        return cls(**(defaults | doc))

    def to_env(self) -> str:
        return json.dumps({"timeout_s": self.timeout_s, "progress": self.progress,
                           "results_dir": self.results_dir})

    def at(self, rel: str) -> Path:
        """A path of a spec (relative to the results folder) resolved against it."""
        return Path(self.results_dir) / rel


def files(named: Mapping[str, Any]) -> SimpleNamespace:
    """Named files as attributes (``ns.runner``); lists stay lists, empty names are dropped."""
    out = {}
    for k, v in named.items():
        if isinstance(v, (list, tuple)):
            v = [str(x) for x in v if str(x)]
        out[k] = v
    return SimpleNamespace(**out)


@dataclass
class Job:
    """A stage's inputs and outputs by name (strings, or lists of strings), its params dict,
    its log file, the run-time knobs, and ``expect``: input path -> the settings hash it must
    record (:func:`phonetrain.stages.stamp.check_inputs`)."""

    input: SimpleNamespace
    output: SimpleNamespace
    params: dict[str, Any]
    log: Path
    runtime: Runtime = field(default_factory=Runtime.from_env)
    expect: dict[str, str] = field(default_factory=dict)

    def spec(self, cls: type[S]) -> S:
        """The job's params as its spec ``cls`` (:func:`phonetrain.stages.specs.parse`)."""
        return specs.parse(cls, self.params, str(self.log))

    def optional(self, name: str) -> str | None:
        """The one input file called ``name``, or None when the rule gave none (an optional
        input such as a tuning file: an empty list in Snakemake)."""
        v = getattr(self.input, name, None)
        if isinstance(v, list):
            if len(v) > 1:
                raise ValueError(f"input {name!r}: expected at most one file, got {v}")
            return v[0] if v else None
        return v or None

    def many(self, name: str) -> list[str]:
        """The input files called ``name`` as a list (one file or several)."""
        v = getattr(self.input, name, None)
        return [] if v is None else list(v) if isinstance(v, list) else [v]


Stage = Callable[[Job], Any]


def run(stage: Stage, job: Job, name: str) -> None:
    """Run one stage, after checking that its inputs were made with the settings it expects
    (:func:`phonetrain.stages.stamp.check_inputs`): its outcome goes to the job's log; a
    :class:`PhonetrainError` becomes a :class:`StageError` naming the stage (anything else is
    a bug and keeps its traceback)."""
    job.log.parent.mkdir(parents=True, exist_ok=True)
    os.environ[locks.JOB_ENV] = f"{name} ({job.log})"   # how a device lock names its holder
    t0, started_s = time.monotonic(), time.time()
    held, spent = len(locks.HELD), len(spans.SPANS)
    try:
        check_inputs(job.expect)
        stage(job)
    except PhonetrainError as e:
        write_text(job.log, f"{name}: FAILED\n{e}\n{_held(held)}{_spent(spent)}")
        raise StageError(f"{name}: {e}") from None
    write_text(job.log, ok_line(name, t0, started_s) + _held(held) + _spent(spent))


def ok_line(name: str, t0: float, started_s: float) -> str:
    """The first line of a finished job's log: ``<name>: ok in S s (from A to B s, Unix
    time)``, from its start (``t0``: monotonic s; ``started_s``: Unix s) to now."""
    return (f"{name}: ok in {time.monotonic() - t0:.2f} s (from {started_s:.3f} to "
            f"{time.time():.3f} s, Unix time)\n")


def _held(since: int) -> str:
    """One log line per device lock the job held (:data:`phonetrain.devices.locks.HELD`)."""
    return "".join(f"device '{d}' locked from {a:.3f} to {b:.3f} s (Unix time)\n"
                   for d, a, b in locks.HELD[since:])


def _spent(since: int) -> str:
    """One log line per wait and runner process of the job (:data:`phonetrain.spans.SPANS`):
    the study's cost is read back from them (:mod:`phonetrain.stages.cost`)."""
    return "".join(s.line() + "\n" for s in spans.SPANS[since:])


def parse(argv: Sequence[str]) -> tuple[str, Job]:
    """``STAGE --log LOG [--params JSON] [--input NAME=PATH [PATH...]]... [--output ...]
    [--expect JSON]``. Raises ValueError on malformed arguments."""
    if not argv or argv[0].startswith("-"):
        raise ValueError("the first argument names the stage")
    name, named, params, log = argv[0], {"--input": {}, "--output": {}}, {}, None
    expect: dict[str, str] = {}
    current: list | None = None
    it = iter(argv[1:])
    for a in it:
        if a in named:
            key, _, value = next(it).partition("=")
            current = named[a].setdefault(key, [])
            if value:
                current.append(value)
        elif a == "--params":
            params, current = json.loads(next(it)), None
        elif a == "--expect":
            expect, current = json.loads(next(it)), None
        elif a == "--log":
            log, current = Path(next(it)), None
        elif current is not None:
            current.append(a)
        else:
            raise ValueError(f"unexpected argument {a!r}")
    if log is None:
        raise ValueError("--log is required")
    one = lambda d: {k: (v[0] if len(v) == 1 else v) for k, v in d.items()}  # noqa: E731
    return name, Job(files(one(named["--input"])), files(one(named["--output"])), params, log,
                     Runtime.from_env(), expect)


def main(stages: Mapping[str, Stage], argv: Sequence[str]) -> int:
    """Entry point of ``python -m phonetrain.stages.<module>``: exit status 0, 1 (the stage
    failed: one message on stderr), 2 (bad arguments) or 130 (interrupted)."""
    try:
        name, job = parse(argv)
        if name not in stages:
            raise ValueError(f"unknown stage {name!r}; this module runs {sorted(stages)}")
    except (ValueError, StopIteration) as e:
        print(f"usage: python -m phonetrain.stages.<module> STAGE --log LOG [--params JSON] "
              f"[--input NAME=PATH...] [--output NAME=PATH...] [--expect JSON]: {e}",
              file=sys.stderr)
        return 2
    try:
        run(stages[name], job, name)
    except StageError as e:
        print(f"phonetrain {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C in the terminal reaches every job: one line each
        # Snakemake marks an interrupted job's outputs incomplete and refuses a plain rerun
        # (IncompleteFilesException) where they all exist, e.g. a previous measurement
        print(f"phonetrain {name}: interrupted; to redo this job rerun the same snakemake "
              "command with --rerun-incomplete added", file=sys.stderr)
        return 130
    return 0
