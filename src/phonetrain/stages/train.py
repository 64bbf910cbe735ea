"""Data, lowering and training stages.

- ``data`` (params :class:`~phonetrain.stages.specs.DataSpec`; output ``dir``): a dataset
  split into per-iteration batch files (:mod:`phonetrain.data`).
- ``lower`` (params: a :class:`~phonetrain.lowering.LowerSpec`, the plan spec, as
  :func:`~phonetrain.stages.specs.plan_params` spells it; output ``dir``): model +
  batch + backend placement -> plan.json and its tensors (:mod:`phonetrain.lowering`).
- ``train`` (params :class:`~phonetrain.stages.specs.RunSpec`, also written as the run's
  ``params.json``; inputs ``manifest`` (deploy's), ``plan`` (the plan that ran on the device),
  ``plan_dir`` (its tensors), ``data``; outputs ``run``, ``trace``,
  ``verify``, ``perfetto`` (the run's Chrome/Perfetto trace,
  :func:`phonetrain.stages.profile.write_perfetto`, written once the run is in its folder:
  no job of its own), and the run folder around them): the runner executes the plan on the device
  (``repeats`` processes, under the device's lock, after the cool-down; each measures
  adaptively until its estimate's interval is within ``measure.ci_target``, between a
  calibration probe before and after), and the measurement is judged
  (:func:`phonetrain.results.stats.judge`, against the device's quiet probe figure kept in
  ``probe/<device>.json`` of the results folder and, for a local device, in this machine's
  record outside it: :mod:`phonetrain.stages.quiet`). An attempt that is unstable (a
  contended host) or whose interval is wider than ``measure.ci_target`` is followed by
  another of ``repeats`` more processes, at most ``measure.max_attempts`` attempts in all,
  none after an attempt that ends with the host still contended (``stopped_contended``);
  the processes of every attempt whose host was not contended are pooled and judged together
  (an attempt on a contended host is set aside), and the result is kept, unstable or not, in
  ``measurement.json`` with ``attempts``, ``max_attempts``, ``earlier_reasons`` (the reasons
  and notes of the attempts before the last) and ``process_attempts`` (the attempt of each
  process kept: ``main`` first, then ``repeat_<k>``). With ``events_apart`` (an OpenCL run on
  one queue, ``measure.events_apart``) those processes record no per-command event
  (``runner run --no-profiling``): the step time is the training loop's own, without the
  events' host cost; one more process of the same job, after them, records an event per
  command for the breakdown and the trace (``events/``: its ``run.json``, ``trace.csv``;
  :func:`events_process`). Then the numpy reference verifies it step by step
  from the runner's own checkpoints (:func:`verify_run`). With ``measure.eval_every`` > 0,
  ``eval.json``: held-out loss and accuracy from the runner's own parameters
  (:mod:`phonetrain.stages.evaluate`). A runner failure or a device lost on the way (a
  dropped connection, a stopped adb server) leaves ``failed.json`` (reason, stderr) and
  nothing that looks complete: an earlier measurement is moved aside
  (:mod:`phonetrain.stages.failed`); a device lacking a library the version
  needs (runner exit 8) records the run as *skipped*.

An OpenCL or Vulkan run keeps what it ran (``ran/``), and a rerun whose kernel build changed is measured
side by side with the previous build, or not measured at all when the two builds are the same
after compilation (:mod:`phonetrain.stages.paired`: ``paired.json``, ``previous/``).
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from phonetrain import layout, spans
from phonetrain.layout import Layout
from phonetrain.errors import StageError
from phonetrain.io import make_temp_dir, read_json, sha256_file, write_json, write_text
from phonetrain.plan import Plan
from phonetrain.runner import (TRACE_HEADER, Adaptive, MissingLibraryError, OutOfMemoryError,
                               Runner, RunnerError)
from phonetrain.devices import is_this_host, shares_host_cpu
from phonetrain.devices.base import TransportError
from phonetrain.stages import paired, schedule
from phonetrain.stages.failed import record_failure
from phonetrain.stages.job import Job, main
from phonetrain.stages.quiet import check_records, machine_record, quiet_probe
from phonetrain.stages.specs import DataSpec, MeasureSpec, RunSpec, parse_plan, to_params
from phonetrain.stages.stamp import files_record, stamp, write_stamp


EXTRA = "extra"   # in a train job's working folder: ran/, previous/, paired.json
DATA_SOURCE = "source.json"  # beside the batch files: the dataset folder actually read


def write_data(job: Job) -> Path:
    """Write one dataset's batch files into ``output.dir`` for the input shape, classes and
    batch size of the params, :data:`DATA_SOURCE` recording the folder they were read
    from (None for digits and synthetic data) and the settings (``inputs.json``,
    :mod:`phonetrain.stages.stamp`)."""
    from phonetrain import data as datasets   # the data job's only: not in lower or train

    s = job.spec(DataSpec)
    dcfg = s.dataset_config
    opts: dict[str, Any] = {}
    if dcfg["path"]:
        opts["folder"] = dcfg["path"]
    if dcfg["allow_download"]:
        opts["download"] = True
    out = Path(job.output.dir)
    doc = datasets.write_batches(s.dataset, s.batch_size, dcfg["num_batches"], out.parent,
                                 seed=s.seed, classes=s.classes, dest=out,
                                 input_shape=tuple(s.input_shape) if s.input_shape
                                 else None, **opts)
    write_json({k: doc[k] for k in ("source_folder", "sha256", "num_batches", "batch_size")}
               | {"dataset": s.dataset}, out / DATA_SOURCE)
    write_stamp(out, stamp(job))
    return out


def lower(job: Job) -> Path:
    """Lower one plan into ``output.dir`` (atomic): plan.json and tensors/, then the settings
    it was lowered with and plan.json's size and SHA-256 (``inputs.json``,
    :mod:`phonetrain.stages.stamp`: a plan edited by hand is made again)."""
    out = Path(job.output.dir)
    from phonetrain.lowering import write_plan_dir   # models and numpy: the lower job's only

    got = write_plan_dir(parse_plan(job.params, str(job.log)), out.parents[1])  # plans/<id>
    if got.resolve() != out.resolve():
        raise StageError(f"lower: the plan went to {got}, not {out}")
    write_stamp(out, stamp(job) | {"files": files_record(out, [layout.PLAN])})
    return out


def verify_run(plan_json: str | Path, root: str | Path, out_dir: str | Path,
               atol: float) -> dict[str, Any]:
    """Verify the runner's output in ``out_dir`` against the numpy reference on the same plan
    and the files under ``root`` and decide the verdict once
    (:func:`phonetrain.reference.verify_run_dir`): per step from the runner's checkpoints
    (``ok``: every checked step within its float32-rounding bound; ``max_abs_err`` and
    ``tolerance`` the worst tensor's error and bound), or, for a run without checkpoints, the
    whole trajectory against ``atol`` (``measure.verify_atol``). The trajectory's drift is
    reported under ``trajectory`` either way.

    numpy's BLAS runs on one thread here (threadpoolctl): the reference's GEMMs are small
    (lenet5's largest 6 x 25088 x 25), and a BLAS thread pool spinning beside other work on a
    busy host made them several times slower than one thread."""
    from threadpoolctl import threadpool_limits

    from phonetrain import reference   # the numpy reference: only where a run is verified

    with threadpool_limits(limits=1, user_api="blas"):
        doc = dict(reference.verify_run_dir(Plan.load(plan_json), Path(root), Path(out_dir),
                                            atol=atol))
    doc["ok"] = bool(doc.get("ok")) and doc.get("max_abs_err") is not None and \
        math.isfinite(doc["max_abs_err"])
    return doc


def adaptive(ms: MeasureSpec) -> Adaptive | None:
    """The runner's adaptive measurement from the ``measure`` settings (None: the plan's
    iteration count exactly, when ``ci_target`` is 0)."""
    if not ms.ci_target:
        return None
    return Adaptive(ci_target=ms.ci_target, max_iterations=ms.max_iterations,
                    max_seconds=ms.max_seconds, resamples=ms.bootstrap_resamples)


def judge_measurement(run_dirs: list[Path], ms: MeasureSpec,
                      probe_records: list[Path] = ()) -> dict[str, Any]:
    """The measurement verdict (:func:`phonetrain.results.stats.judge`) over the runner
    outputs of every repeat: their measured iterations (pooled, and per process), their
    conditions with the calibration probe (``run.json``'s ``probe``) and the cool-down before
    it (``device.json``'s ``cooldown`` where the device has sensors, with
    ``measure.cooldown_threshold_c``), against the device's quiet probe figure kept in
    ``probe_records`` (:func:`phonetrain.stages.quiet.quiet_probe`; none: no figure)."""
    procs, conds, probes = [], [], []
    for d in run_dirs:
        run = read_json(d / layout.RUN)
        procs.append([i["wall_ms"] for i in run.get("iters", []) if not i.get("warmup")])
        probe = run.get("probe") or {}
        probes.append(probe)
        readings = d / layout.DEVICE_READINGS
        cooldown = (read_json(readings).get("cooldown") or {}) if readings.is_file() else {}
        conds.append((run.get("conditions") or {})
                     | {f"probe_{k}": probe.get(k) for k in ("before_ms", "after_ms")}
                     | cooldown | ({"cooldown_threshold_c": ms.cooldown_threshold_c}
                                  if cooldown else {}))
    from phonetrain.results import stats   # numpy: the train job's, not the lower job's

    quiet = quiet_probe(list(probe_records), probes) if probe_records else None
    return stats.judge([w for p in procs for w in p], conds, ci_target=ms.ci_target,
                       max_other_cpu_share=ms.max_other_cpu_share,
                       resamples=ms.bootstrap_resamples, process_walls_ms=procs,
                       quiet_probe_ms=quiet, max_probe_slowdown=ms.max_probe_slowdown)


def train_and_trace(job: Job) -> Path:
    """The ``train`` stage: :func:`train`, then, where the job names an output
    ``perfetto``, the run's Chrome/Perfetto trace (converted where the trace was just
    written: the study spends no job per run on it)."""
    rdir = train(job)
    out = getattr(job.output, "perfetto", None)
    if out:
        from phonetrain.stages.profile import write_perfetto  # reads the trace with pandas

        s = job.spec(RunSpec)
        write_perfetto(job.output.run, job.output.trace, out, title=s.run_id, device=s.device)
    return rdir


def train(job: Job) -> Path:
    """Run one experiment on its device ``repeats`` times and verify it; see the module
    docstring for the files."""
    s = job.spec(RunSpec)
    p = to_params(s)   # params.json
    dev, ms = s.device_config, s.measure
    rdir = Path(job.output.run).parent
    rdir.mkdir(parents=True, exist_ok=True)
    remove_leftovers(rdir)
    (rdir / layout.FAILED).unlink(missing_ok=True)
    manifest = read_json(job.input.manifest)
    r = Runner.for_device(dev, job.runtime.at(s.stage_root), timeout_s=job.runtime.timeout_s,
                          progress=job.runtime.progress)
    records = [Path(Layout(str(rdir.parents[2])).probe(s.device))]   # results/runs/<dev>/<exp>
    if is_this_host(dev):
        records.append(machine_record(r.transport.facts()))
    check_records(records)   # before measuring: a bad record would lose the measurement
    prev = paired.previous_run(rdir, rdir.parents[2])
    tmp = make_temp_dir(rdir, ".train-")
    try:
        ran = paired.keep_ran(tmp / EXTRA, s, job.input.plan, manifest)
        mode, why = paired.pairing(prev, p, ran, Path(job.input.plan))
        if mode == "identical":
            return _identical(prev, tmp, rdir, s, p, why)
        try:
            with r.lock():
                measured_from_s = time.time()
                got = (_paired_attempts(r, manifest, tmp, s, p, rdir, records, prev)
                       if mode == "paired" else _attempts(r, manifest, tmp, s, p, rdir, records))
                if isinstance(got, Path):
                    return got   # recorded skipped or oom
                verdict, kept, attempt, earlier = got
                _number_processes(kept, tmp)
                if s.events_apart:
                    got = events_process(r, manifest, tmp, s, p, rdir)
                    if isinstance(got, Path):
                        return got   # recorded skipped or oom
                write_json(schedule.record(shares_host_cpu(dev)) | {
                    "measured_from_s": measured_from_s, "measured_to_s": time.time()},
                    tmp / "main" / layout.SCHEDULE)
        except TransportError as e:   # the device went away outside the runner's run
            reason = f"device '{dev['name']}', run {s.run_id}: {e}"
            record_failure(rdir, p, reason)
            raise StageError(reason) from None
        verdict.update(attempts=attempt, max_attempts=ms.max_attempts, earlier_reasons=earlier,
                       process_attempts=[a for a, _ in kept],
                       events_apart=bool(s.events_apart))
        plan_dir = Path(job.input.plan_dir)
        verify = verify_run(job.input.plan, plan_dir.parent.parent, tmp / "main",
                            ms.verify_atol)
        verify["plan_sha256"] = sha256_file(job.input.plan)  # the plan this run measured
        write_json(verify, tmp / "main" / layout.VERIFY)
        if mode == "paired":
            _verify_previous(tmp / EXTRA, plan_dir.parent.parent, ms, bool(verify["ok"]))
        if ms.eval_every > 0:   # held-out evaluation: its imports only where it is on
            from phonetrain.stages.evaluate import evaluate_run

            evaluate_run(job.input.plan, plan_dir.parent.parent, tmp / "main", s)
        write_json(verdict, tmp / "main" / layout.MEASUREMENT)
        # params.json goes in with the measurement: a run interrupted before it finishes
        # leaves the previous measurement beside the settings it was measured with
        write_json(p, tmp / "main" / layout.PARAMS)
        _install(tmp, rdir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rdir


def _attempts(r: Runner, manifest: dict[str, Any], tmp: Path, s: RunSpec, p: dict[str, Any],
              rdir: Path, records: list[Path]
              ) -> Path | tuple[dict[str, Any], list[tuple[int, Path]], int, list[list[str]]]:
    """Measure until the verdict is usable with an interval within ``measure.ci_target``, or
    ``measure.max_attempts`` attempts ran, each attempt ``measure.repeats`` more runner
    processes. The processes of every attempt whose host was not contended (its probe at the
    quiet figure) are pooled, so an interval too wide for a few processes narrows with more of
    them (pyperf samples many worker processes for the variation between them); an attempt on
    a contended host is set aside, unless nothing else was measured; one that ends with the
    host still contended (:func:`contended_at_end`) is the last, its verdict saying so under
    ``stopped_contended``. Returns the run folder
    when the device cannot do the run (skipped or oom), else ``(verdict, [(attempt, process
    folder), ...] kept, attempts, earlier reasons)``."""
    ms = s.measure
    pool: list[tuple[int, Path]] = []   # the processes of uncontended attempts
    earlier: list[list[str]] = []       # the reasons of the attempts before the last
    for attempt in range(1, ms.max_attempts + 1):
        fresh = _measure(r, manifest, tmp / f"attempt_{attempt}", s, p, rdir, tmp)
        if isinstance(fresh, Path):
            return fresh
        tagged = [(attempt, f) for f in fresh]
        alone = judge_measurement(fresh, ms, records)
        if not alone["unstable"]:
            pool += tagged
        kept = pool or tagged
        verdict = alone if kept == tagged else \
            judge_measurement([f for _, f in kept], ms, records)
        why = verdict["reasons"] + verdict["notes"]
        slow = contended_at_end(fresh, alone) if alone["unstable"] else None
        if slow is not None and attempt < ms.max_attempts:
            verdict["stopped_contended"] = (
                f"attempt {attempt} ended with the host still contended (closing probe "
                f"{slow:.2f}x its quiet figure, over measure.max_probe_slowdown "
                f"{ms.max_probe_slowdown:g}): no further attempt, which would be set aside "
                "as well; measure it again once the host is quieter (phonetrain refresh "
                "--unstable)")
            print(f"phonetrain: run {s.device}/{s.run_id}: {verdict['stopped_contended']}",
                  file=sys.stderr)
        if not why or attempt == ms.max_attempts or slow is not None:
            return verdict, kept, attempt, earlier
        earlier.append(why)
        print(f"phonetrain: run {s.device}/{s.run_id}, attempt {attempt} of {ms.max_attempts} "
              f"({len(kept)} processes kept): {'; '.join(why)}; measuring {ms.repeats} more",
              file=sys.stderr)
    raise AssertionError("unreachable: the last attempt returns")


def contended_at_end(run_dirs: list[Path], verdict: dict[str, Any]) -> float | None:
    """How many times slower than the device's quiet figure (``verdict["quiet_probe_ms"]``)
    the closing calibration probe of the last process in ``run_dirs`` ran (``run.json``'s
    ``probe.after_ms``: the latest reading of the host), when that is over
    ``verdict["max_probe_slowdown"]``; None otherwise (quiet again, no probe, no figure, or
    the rule off). A contended attempt whose host is still contended as it ends is not
    followed by another: that one would be set aside too, as each attempt on a contended
    host is (:func:`_attempts`), and under a host busy for the whole study the retries were
    most of its measuring time."""
    quiet, limit = verdict.get("quiet_probe_ms"), verdict.get("max_probe_slowdown")
    if not run_dirs or not quiet or not limit:
        return None
    after = (read_json(run_dirs[-1] / layout.RUN).get("probe") or {}).get("after_ms")
    if not after or after / quiet <= limit:
        return None
    return after / quiet


def _identical(prev: Path, tmp: Path, rdir: Path, s: RunSpec, p: dict[str, Any],
               why: str) -> Path:
    """An identical build (:func:`phonetrain.stages.paired.pairing`): the previous
    measurement becomes this run's, nothing measured, ``paired.json`` saying so."""
    paired.copy_previous(prev, tmp)
    write_json({"verdict": "no change", "reason": f"identical build: {why}",
                "identical_build": True, "pairs": 0, "device": s.device}
               | paired.previous_doc(prev), tmp / EXTRA / paired.PAIRED)
    write_json(p, tmp / "main" / layout.PARAMS)
    _install(tmp, rdir)
    print(f"phonetrain: run {s.device}/{s.run_id}: no change (identical build: {why}); "
          "not re-measured", file=sys.stderr)
    return rdir


def _paired_attempts(r: Runner, manifest: dict[str, Any], tmp: Path, s: RunSpec,
                     p: dict[str, Any], rdir: Path, records: list[Path], prev: Path
                     ) -> Path | tuple[dict[str, Any], list[tuple[int, Path]], int,
                                       list[list[str]]]:
    """The side-by-side measurement (:func:`phonetrain.stages.paired.pairs_until_decisive`):
    the previous build pushed beside the new one, pairs (one runner process each, measuring
    both builds with their iterations alternating) until the paired verdict is decisive (the
    first look after ``measure.repeats`` pairs). The new build's sides are judged as
    :func:`_attempts` judges processes; the paired verdict goes to ``tmp/extra/paired.json``,
    the previous build's sides to ``tmp/extra/previous/``.
    Returns what :func:`_attempts` returns (one attempt)."""
    ms = s.measure
    remote, _ = paired.push_previous(r, prev, s.run_id, s.kernel, tmp)

    def one(man: dict[str, Any], into: Path, previous: tuple[str, Path]) -> Path:
        return _process(r, man, into, s, p, rdir, tmp, profiling=not s.events_apart,
                        checkpoints=paired.verified_process(into), previous=previous)
    got = paired.pairs_until_decisive(one, manifest, remote, tmp / "pairs", first=ms.repeats)
    if isinstance(got, Path):
        return got
    pairs, doc = got
    paired.note(f"{s.device}/{s.run_id}", doc)
    kept = [(1, b) for _, b in pairs]
    verdict = judge_measurement([b for _, b in pairs], ms, records)
    extra = tmp / EXTRA
    paired.install_previous(pairs, extra)
    shutil.copy2(prev / paired.RAN / paired.RAN_JSON, extra / paired.PREVIOUS / paired.RAN_JSON)
    shutil.copy2(tmp / paired.PREVIOUS_PLAN, extra / paired.PREVIOUS / layout.PLAN)
    write_json(doc | {"device": s.device} | paired.previous_doc(prev), extra / paired.PAIRED)
    return verdict, kept, 1, []


def _verify_previous(extra: Path, root: Path, ms: MeasureSpec, new_ok: bool) -> None:
    """Verify the previous build's first process of a paired rerun per step as the new one's
    (against its own plan, ``previous/`` of ``extra``); a side that does not verify turns the
    paired verdict into ``cannot tell`` with the reason."""
    prev = extra / paired.PREVIOUS
    doc = read_json(extra / paired.PAIRED)
    ver = verify_run(prev / layout.PLAN, root, prev / "process_0", ms.verify_atol)
    write_json(ver, prev / layout.VERIFY)
    for d in list(prev.glob("process_*/" + layout.CHECKPOINTS)) + \
            list(prev.glob("process_*/" + layout.DUMPS)):
        shutil.rmtree(d, ignore_errors=True)   # verified: the tensors are not kept
    bad = [side for side, ok in (("previous", bool(ver["ok"])), ("new", new_ok)) if not ok]
    if bad:
        doc |= {"verdict": "cannot tell",
                "reason": f"the {' and the '.join(bad)} build did not verify"}
    write_json(doc | {"previous_verified": bool(ver["ok"])}, extra / paired.PAIRED)


def _number_processes(kept: list[tuple[int, Path]], tmp: Path) -> None:
    """Move the kept process folders to ``tmp/main`` (the first: the process verified) and
    ``tmp/repeat_<k>``; the attempts' folders (and a paired rerun's ``pairs``), with any
    set-aside process, are removed."""
    for k, (_, f) in enumerate(kept):
        os.replace(f, tmp / ("main" if k == 0 else f"repeat_{k}"))
    for d in list(tmp.glob("attempt_*")) + list(tmp.glob("pairs")):
        shutil.rmtree(d)


def _measure(r: Runner, manifest: dict[str, Any], into: Path, s: RunSpec, p: dict[str, Any],
             rdir: Path, tmp: Path) -> list[Path] | Path:
    """One attempt: the runner measures the plan ``measure.repeats`` times (each after the
    cool-down; without per-command events when ``events_apart``) into ``into/process_<k>``,
    under the device's lock held by the caller. Only ``process_0`` keeps the plan's
    checkpoints: the run's verified process (``main``) is the first process of the first
    attempt kept (:func:`_attempts` keeps or sets aside whole attempts), and the others'
    checkpoints were never read (each LeNet-5 process wrote 19 MB of them). Returns those
    folders, or the run folder when the device cannot do the run (recorded skipped or oom,
    through ``tmp``); raises :class:`StageError` (``failed.json`` written) when the runner
    fails."""
    outs = []
    for rep in range(s.measure.repeats):
        got = _process(r, manifest, into / f"process_{rep}", s, p, rdir, tmp,
                       profiling=not s.events_apart, checkpoints=rep == 0)
        if got == rdir:   # recorded skipped or oom
            return got
        outs.append(got)
    return outs


def events_process(r: Runner, manifest: dict[str, Any], tmp: Path, s: RunSpec,
                   p: dict[str, Any], rdir: Path) -> Path | None:
    """The breakdown's process of an ``events_apart`` run: one more runner process after
    the timed ones, with a profiling event per command, exactly the plan's iterations
    (adaptively as the timed ones with ``measure.events_adaptive``), into
    ``tmp/events`` (installed as the run folder's ``events/``). Its per-command device times
    give the breakdown, the commands and the trace; its iteration times, which carry the
    events' host cost, are not the step time; it keeps no checkpoint (not verified) and runs
    no calibration probe (no verdict judges it).
    Returns None, or the run folder when the device cannot do the run (recorded skipped or
    oom)."""
    got = _process(r, manifest, tmp / layout.EVENTS, s, p, rdir, tmp, profiling=True,
                   fixed=not s.events_adaptive, checkpoints=False, probe=False)
    return got if got == rdir else None


def _process(r: Runner, manifest: dict[str, Any], got: Path, s: RunSpec, p: dict[str, Any],
             rdir: Path, tmp: Path, profiling: bool, fixed: bool = False,
             checkpoints: bool = True, probe: bool = True,
             previous: tuple[str, Path] | None = None) -> Path:
    """One runner process measuring the plan into ``got`` after the cool-down, with or
    without per-command events (``profiling``), adaptively (:func:`adaptive`) or, with
    ``fixed``, exactly the plan's iterations; ``checkpoints=False``: none of the plan's
    checkpoints kept (a process that is not verified); ``probe=False``: no calibration probe
    (a process no verdict judges); ``previous`` (a plan on the device, a folder): the same
    process measures that plan side by side into that folder (:meth:`Runner.run`). Returns
    ``got``, or the run folder ``rdir``
    when the device cannot do the run (recorded skipped or oom, through ``tmp``); raises
    :class:`StageError` (``failed.json`` written) when the runner fails."""
    dev, ms = s.device_config, s.measure
    if ms.cooldown_s > 0:
        spans.wait("cool-down", ms.cooldown_s)
    conditions = _conditions_before(r.transport, ms)
    try:
        r.run(manifest["plan"], got, threads=ms.threads,
              adaptive=None if fixed else adaptive(ms),
              power_sample_ms=ms.power_sample_ms, profiling=profiling,
              checkpoints=checkpoints, probe=probe, previous=previous)
    except MissingLibraryError as e:
        return _skip(s, tmp, rdir, e.message)
    except OutOfMemoryError as e:   # an outcome of the batch size, not a crash
        return _skip(s, tmp, rdir, e.message, status="oom")
    except (RunnerError, TransportError) as e:  # the runner failed, or the device went
        reason = f"device '{dev['name']}', run {s.run_id}: {e}"
        stderr = e.stderr if isinstance(e, RunnerError) else ""  # a transport has none
        record_failure(rdir, p, reason, stderr)
        if stderr and not r.transport.streams_stderr:
            sys.stderr.write(stderr)
        raise StageError(reason + _tail(stderr)) from None
    if conditions is not None:
        readings = conditions | {"after": r.transport.readings()}
        for d in [got] + ([Path(previous[1])] if previous else []):   # one process, both sides
            write_json(readings, d / layout.DEVICE_READINGS)
    return got


def remove_leftovers(rdir: Path) -> list[Path]:
    """Remove what a train job killed hard (SIGKILL, power loss) left in its run folder: its
    ``.train-*`` working folder and the temporary files of unfinished atomic writes
    (``.<name>.*.tmp``). Snakemake runs one job per run folder at a time (its own lock), so
    anything of that kind found when a job starts is a leftover. Returns what was removed."""
    gone = [d for d in rdir.glob(".train-*") if d.is_dir()]
    gone += [f for f in rdir.glob(".*.tmp") if f.is_file()]
    for g in gone:
        if g.is_dir():
            shutil.rmtree(g, ignore_errors=True)
        else:
            g.unlink(missing_ok=True)
    return gone


def _tail(stderr: str, lines: int = 20) -> str:
    """The last lines of a runner's stderr, for the job's log."""
    tail = (stderr or "").strip().splitlines()[-lines:]
    return ("\nrunner stderr (last lines):\n" + "\n".join(tail)) if tail else ""


def _skip(s: RunSpec, tmp: Path, rdir: Path, reason: str,
          status: str = "skipped") -> Path:
    """Record a run the device cannot do as ``status``, not failed: ``skipped`` (runner exit
    8, a library or image support is missing) or ``oom`` (exit 9, the batch's tensors do not
    fit). The rule's outputs, installed atomically -- ``run.json`` (``status``, ``reason``,
    ``batch_size``), a ``trace.csv`` with only the runner's header, ``verify.json``
    (``skipped: true``) -- so the job succeeds without anything that looks like a
    measurement."""
    main_dir = tmp / "main"
    main_dir.mkdir(parents=True, exist_ok=True)
    write_json(to_params(s), main_dir / layout.PARAMS)
    write_text(main_dir / layout.TRACE, TRACE_HEADER)
    write_json({"skipped": True, "ok": None, "max_abs_err": None, "reason": reason},
               main_dir / layout.VERIFY)
    write_json({"status": status, "reason": reason, "run_id": s.run_id,
                "device": s.device, "kernel": s.kernel,
                "batch_size": s.batch_size}, main_dir / layout.RUN)
    _install(tmp, rdir)
    what = "skipped" if status == "skipped" else "out of memory"
    print(f"phonetrain: run {s.device}/{s.run_id} {what}: {reason}", file=sys.stderr)
    return rdir


NOT_RUN = ("skipped", "oom")   # run.json statuses of a run recorded without a measurement


def skipped_reason(run_json: str | Path) -> str | None:
    """Why a run holds no measurement (its ``run.json`` says ``status: skipped`` or ``oom``):
    ``"<status>: <reason>"``, else None."""
    doc = read_json(run_json)
    st = doc.get("status")
    return f"{st}: {doc.get('reason') or st}" if st in NOT_RUN else None


def _conditions_before(t: Any, ms: MeasureSpec) -> dict[str, Any] | None:
    """Devices with sensors (adb): wait for the cool-down (measure.cooldown_threshold_c,
    cooldown_limit_s), then record facts and readings (docs/device-sensors.md); None else."""
    if not hasattr(t, "cooldown"):
        return None
    from phonetrain.devices.adb import Cooldown
    with spans.span(spans.WAIT, "cool-down"):
        cd = t.cooldown(Cooldown(ms.cooldown_threshold_c, ms.cooldown_limit_s))
    return {"facts": t.facts(), "cooldown": cd, "before": t.readings()}


def _install(tmp: Path, rdir: Path) -> None:
    """Move a finished run into its folder: extra repeats, the events process, dumps,
    checkpoints, then run.json last; what an earlier measurement left that this one does not
    replace goes first."""
    for old in list(rdir.glob("repeat_*")) + [rdir / layout.DUMPS, rdir / layout.CHECKPOINTS,
                                             rdir / layout.EVENTS, rdir / paired.RAN,
                                             rdir / paired.PREVIOUS]:
        shutil.rmtree(old, ignore_errors=True)
    (rdir / layout.MEASUREMENT).unlink(missing_ok=True)
    (rdir / paired.PAIRED).unlink(missing_ok=True)  # a run measured alone has no pairing
    (rdir / layout.EVAL).unlink(missing_ok=True)  # a run without evaluation leaves none
    for d in sorted(tmp.glob("repeat_*")) + sorted(tmp.glob(layout.EVENTS)) + \
            sorted((tmp / EXTRA).glob("*")):
        os.replace(d, rdir / d.name)
    main_dir = tmp / "main"
    for f in sorted(main_dir.iterdir(), key=lambda f: f.name == layout.RUN):
        os.replace(f, rdir / f.name)


STAGES = {"data": write_data, "lower": lower, "train": train_and_trace}

if __name__ == "__main__":
    sys.exit(main(STAGES, sys.argv[1:]))
