"""One experiment end to end -- lower, deploy, build, run, verify -- without Snakemake.

The Snakemake rules call the stage functions below one job at a time, in-process through
:func:`job`; ``phonetrain run`` calls :func:`run_single`, which chains the same functions,
so both write the same files.

Each stage takes a *params dict* built by :func:`job_params` from the composed sweep, holding
exactly what its result depends on (nothing run-time only, such as timeouts or progress
output). The rules pass these dicts as Snakemake ``params``, so Snakemake's ``params`` rerun
trigger reruns exactly the jobs whose settings changed, and a dry run changes no file.

- ``device``: the device config (runner build); ``bandwidth``: plus the sweep's size limit;
- ``kernel``: one kernel version on one device (with the sources' hash);
- ``data``: one dataset split into batches for a model's input shape and batch size;
- ``plan``: what the lowered plan depends on; ``run``: one run (also written to the run folder
  as ``params.json``, which :mod:`phonetrain.results.aggregate` reads).

Errors: :class:`StageError` (a stage that cannot complete; the message names the device,
experiment and cause, with the runner's stderr tail).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from phonetrain.devices import TransportError, get_transport

if TYPE_CHECKING:  # the stages run in light processes: hydra is imported only to compose
    from phonetrain.config import Experiment, Sweep

RUN_EXPECT = ["run.json", "trace.csv"]


class StageError(RuntimeError):
    """A stage that failed; the message names the device/experiment and the cause."""


# ---------------------------------------------------------------- job params

def data_dir_rel(dataset: str, batch_size: int, model_name: str) -> str:
    """Batch folder of a dataset for a model, relative to a staging root (``data/...``)."""
    from phonetrain import data as datasets
    from phonetrain.models import get_model
    m = get_model(model_name)
    return str(datasets.batch_dir(dataset, batch_size, m.input_shape, m.classes))


def dataset_of(exp: Experiment) -> str:
    return exp.config["model"].get("dataset") or exp.config["dataset"]["name"]


def kernel_hash(version: str) -> str:
    from phonetrain.kernels import source_hash
    return source_hash(version)[:16]


RUN_MEASURE_KEYS = ("warmup", "iterations", "repeats", "seed", "threads", "cooldown_s",
                    "cooldown_threshold_c", "cooldown_limit_s", "verify_atol")


def run_params(exp: Experiment) -> dict[str, Any]:
    """``params.json`` of a run folder: identity and settings read by
    :func:`phonetrain.results.aggregate.read_run`, plus the config the run depends on under ``config``
    (measurement keys limited to :data:`RUN_MEASURE_KEYS`)."""
    from phonetrain.config import config_hash
    c = dict(exp.config)
    c["measure"] = {k: c["measure"][k] for k in RUN_MEASURE_KEYS if k in c["measure"]}
    b = c["backend"]
    return {
        "run_id": exp.id, "model": exp.model, "device": exp.device, "backend": exp.backend,
        "placement": None if b["kind"] == "cpu" else b["placement"],
        "transfer": None if b["kind"] == "cpu" else b["transfer"],
        "kernel": None if b["kind"] == "cpu" else exp.kernel,
        "dataset": dataset_of(exp), "batch_size": c["model"]["batch_size"],
        "warmup": c["measure"]["warmup"], "iterations": c["measure"]["iterations"],
        "threads": c["measure"]["threads"], "verify_atol": c["measure"]["verify_atol"],
        "config_hash": config_hash(c),
        "kernel_hash": kernel_hash(exp.kernel) if exp.is_opencl else None,
        "config": c,
    }


def job_params(sweep: Sweep) -> dict[str, dict[Any, dict[str, Any]]]:
    """Every job's params dict, keyed by job: ``device[d]``, ``bandwidth[d]``,
    ``kernel[(d, k)]``, ``data[data_dir]``, ``plan[exp_id]``, ``run[(d, exp_id)]``."""
    from phonetrain.config import plan_config
    from phonetrain.data import dataset_info
    from phonetrain.models import get_model
    out: dict[str, dict[Any, dict[str, Any]]] = {
        "device": {}, "bandwidth": {}, "kernel": {}, "data": {}, "plan": {}, "run": {}}
    ms = sweep.root["measure"]
    for d, dcfg in sweep.members["device"].items():
        dev = {k: v for k, v in dcfg.items() if k != "facts"}
        out["device"][d] = {"device": d, "device_config": dev}
        out["bandwidth"][d] = {"device": d, "device_config": dev,
                               "bandwidth_max_bytes": ms["bandwidth_max_bytes"]}
        for k in sweep.kernels:
            out["kernel"][(d, k)] = {"device": d, "kernel": k, "kernel_hash": kernel_hash(k),
                                     "device_config": dev}
    for exp in sweep.experiments:
        pc = plan_config(exp)
        ddir = data_dir_rel(dataset_of(exp), pc["model"]["batch_size"], exp.model)
        pc["data_dir"] = ddir
        # Not the model: every model reading a dataset shares its batch files. Only synthetic
        # data takes its shape and classes from the model (compatibility is checked at
        # composition).
        m, ds = get_model(exp.model), dataset_of(exp)
        synth = dataset_info(ds).input_shape is None
        out["data"][ddir] = {"dataset": ds,
                             "input_shape": list(m.input_shape) if synth else None,
                             "classes": m.classes if synth else None,
                             "batch_size": pc["model"]["batch_size"], "dir": ddir,
                             "dataset_config": exp.config["dataset"],
                             "seed": pc["measure"]["seed"]}
        out["plan"][exp.id] = pc
        out["run"][(exp.device, exp.id)] = run_params(exp)
    return out


def read_json(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def write_json(obj: Any, path: Path) -> None:
    """Atomic JSON write (temp file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str) + "\n")
    tmp.replace(path)


# ---------------------------------------------------------------- stages

def build_runner(p: dict[str, Any], out: Path) -> Path:
    """Build the runner for the device of params ``p`` into ``out`` (atomic), with the
    device's toolchain (:mod:`phonetrain.devices.toolchains`: host cc, Android NDK, aarch64 cross)."""
    from phonetrain import runner
    from phonetrain.devices import toolchains
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    dev = p["device_config"]
    try:
        tc = toolchains.for_device(dev)
    except toolchains.ToolchainError as e:
        raise StageError(str(e)) from None
    # Devices sharing a toolchain share one compile: build_runner keys its cache folder by
    # sources, compiler and flags (and locks it), so e.g. three phones compile once.
    cache = out.parent.parent / ".runner-cache"
    built = runner.build_runner(cache, cc=tc.cc, extra_flags=tc.extra_flags)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    shutil.copy2(built, tmp)
    os.replace(tmp, out)
    return out


def _selectors(dev: dict[str, Any]) -> list[str]:
    argv = []
    for flag, key in (("--platform", "opencl_platform"), ("--device", "opencl_device"),
                      ("--cl-lib", "opencl_library")):
        if dev.get(key):
            argv += [flag, str(dev[key])]
    return argv


def _transport(dev: dict[str, Any], results: Path) -> Any:
    return get_transport(dev, results)


def _fail_text(res: Any, what: str) -> str:
    tail = "\n".join((res.stderr or "").strip().splitlines()[-40:])
    return f"{what} exited with status {res.returncode}:\n{tail}"


def build_kernels(p: dict[str, Any], out_json: Path, results: Path,
                  timeout_s: float = 600.0) -> dict[str, Any]:
    """Compile one kernel version on one device with the runner's ``build`` mode; write
    ``build.json`` (per-program build time, log, binary size) and ``params.json`` beside it.
    A compile error raises :class:`StageError` with the compiler log (no build.json)."""
    from phonetrain.kernels import load_version, stage_kernels
    out_json = Path(out_json)
    dev, version = p["device_config"], p["kernel"]
    t = _transport(dev, results)
    runner = Path(results) / "build" / dev["name"] / "runner"
    with tempfile.TemporaryDirectory(prefix="phonetrain-kernels-") as tmp:
        src = stage_kernels(version, Path(tmp))
        with t.lock():
            t.push(runner, "runner")
            t.push(src, f"kernels/{version}")
            out_rel = f"out/build-{version}"
            t.run(["rm", "-rf", out_rel], timeout_s=60)
            argv = ["./runner", "build", "--options", load_version(version).options,
                    "--out", out_rel] + _selectors(dev)
            for f in sorted(src.glob("*.cl")):
                argv += ["--source", f"kernels/{version}/{f.name}"]
            res = t.run(argv, timeout_s=timeout_s)
            if res.returncode != 0:
                if not getattr(t, "streams_stderr", False):
                    sys.stderr.write(res.stderr)
                reason = (f"device '{dev['name']}': kernel version '{version}' failed to "
                          f"build; {_fail_text(res, 'runner build')}")
                _mark_runs_failed(Path(results), dev["name"], version, reason, res.stderr)
                raise StageError(reason)
            t.pull(out_rel, Path(tmp) / "pulled", expect=["build.json"])
        doc = read_json(Path(tmp) / "pulled" / "build.json")
    doc.update(device=dev["name"], kernel=version, kernel_hash=p["kernel_hash"])
    write_json(p, out_json.with_name("params.json"))
    out_json.with_name("failed.json").unlink(missing_ok=True)
    write_json(doc, out_json)
    return doc


def _mark_runs_failed(results: Path, device: str, version: str, reason: str, log: str) -> None:
    """Leave ``failed.json`` (reason + compiler log) beside the would-be build.json; the
    aggregate copies it into each run folder of this version on this device."""
    write_json({"reason": reason, "log": log[-20000:]},
               results / "build" / device / "kernels" / version / "failed.json")


def mark_missing_runs(results: str | Path, jp: dict[str, Any]) -> None:
    """Before aggregating: give every expected run folder its ``params.json`` and, where the
    run never happened because its kernel build failed, that build's ``failed.json``.

    A run.json measured under other params (the settings or a kernel changed, then the
    workflow failed before re-measuring it) is stale: it is kept, but ``failed.json`` says
    why, so the summary never shows it as a measurement of the current config."""
    from phonetrain.config import write_if_changed
    R = Path(results)
    for (dev, exp_id), p in jp["run"].items():
        rdir = R / "runs" / dev / exp_id
        rdir.mkdir(parents=True, exist_ok=True)
        old = rdir / "params.json"
        stale = ((rdir / "run.json").exists() and old.exists()
                 and read_json(old) != json.loads(json.dumps(p, default=str)))
        write_if_changed(old, p)
        build_failed = R / "build" / dev / "kernels" / str(p["kernel"]) / "failed.json"
        if p["kernel"] and (stale or not (rdir / "run.json").exists()) and build_failed.exists():
            shutil.copyfile(build_failed, rdir / "failed.json")
        elif stale:
            write_json({"reason": "not re-measured: its settings or sources changed since "
                        "run.json was measured, and the workflow stopped before rerunning it "
                        "(a job failed or was interrupted); rerun snakemake"},
                       rdir / "failed.json")


def write_data(p: dict[str, Any], results: Path) -> Path:
    """Write one dataset's batch files under ``results/<data dir>`` (the phonetrain.data
    layout) for the input shape, classes and batch size of params ``p``."""
    from phonetrain import data as datasets
    dcfg = p["dataset_config"]
    opts: dict[str, Any] = {}
    if dcfg.get("path"):
        opts["folder"] = dcfg["path"]
    if dcfg.get("allow_download"):
        opts["download"] = True
    datasets.write_batches(p["dataset"], p["batch_size"], dcfg["num_batches"], Path(results),
                           seed=p["seed"], classes=p["classes"],
                           input_shape=tuple(p["input_shape"]) if p["input_shape"] else None,
                           **opts)
    return Path(results) / p["dir"]


def lower_spec(pc: dict[str, Any]) -> Any:
    """The :class:`phonetrain.lowering.LowerSpec` of a plan params dict."""
    from phonetrain.lowering import LowerSpec
    m, b, ms = pc["model"], pc["backend"], pc["measure"]
    opencl = b["kind"] == "opencl"
    return LowerSpec(model=m["name"], batch_size=m["batch_size"], backend=b["kind"],
                     placement=b["placement"] if opencl else None,
                     transfer=b["transfer"] if opencl else None,
                     kernel=pc["kernel"]["name"] if opencl else "baseline",
                     dataset=m.get("dataset") or pc["dataset"]["name"],
                     num_batches=pc["dataset"]["num_batches"], warmup=ms["warmup"],
                     iterations=ms["iterations"], seed=ms["seed"], lr=m["lr"],
                     momentum=m["momentum"], weight_decay=m["weight_decay"],
                     threads=ms["threads"], plan_id=pc["id"])


def lower(p: dict[str, Any], results: Path) -> Path:
    """Lower one plan into ``results/plans/<experiment id>/`` (atomic); returns the folder."""
    from phonetrain.lowering import write_plan_dir
    return write_plan_dir(lower_spec(p), Path(results))


def deploy(p: dict[str, Any], ddir: str, manifest: Path, results: Path) -> dict[str, Any]:
    """Push the runner, the plan, its data and (OpenCL) the kernel sources to the device's
    staging root; write a manifest of what is there. Unchanged files are not re-sent."""
    from phonetrain.kernels import stage_kernels
    cfg, R = p["config"], Path(results)
    dev = cfg["device"]
    t = _transport(dev, R)
    sent = {}
    with t.lock():
        sent["runner"] = t.push(R / "build" / dev["name"] / "runner", "runner")
        plan_dir = R / "plans" / p["run_id"]
        tuned = R / "build" / dev["name"] / "kernels" / str(p["kernel"]) / "tuning.json"
        with tempfile.TemporaryDirectory(prefix="phonetrain-plan-") as tmp:
            if p["kernel"] and tuned.exists():   # the device's tuned GEMM config (issue 6)
                from phonetrain.gemm_stages import tuned_plan_dir
                plan_dir = tuned_plan_dir(plan_dir, p["kernel"], tuned, Path(tmp) / "plan")
            sent["plan"] = t.push(plan_dir, f"plans/{p['run_id']}")
        sent["data"] = t.push(R / ddir, ddir)
        if p["kernel"]:
            with tempfile.TemporaryDirectory(prefix="phonetrain-kernels-") as tmp:
                src = stage_kernels(p["kernel"], Path(tmp))
                sent["kernels"] = t.push(src, f"kernels/{p['kernel']}")
    doc = {"device": dev["name"], "run_id": p["run_id"], "files_sent": sent,
           "plan": f"plans/{p['run_id']}/plan.json", "data": ddir}
    write_json(doc, Path(manifest))
    return doc


def train(p: dict[str, Any], results: Path, timeout_s: float = 600.0,
          progress: bool = True) -> Path:
    """Run one experiment on its device (under the device's lock), ``repeats`` times, and
    verify it against the numpy reference. Writes into the run folder
    ``results/runs/<device>/<id>/``: ``params.json``, ``run.json``, ``trace.csv``, ``dumps/``
    (repeat 0), ``repeat_<k>/`` (more repeats) and ``verify.json``; on a runner failure
    ``failed.json`` (reason, stderr) and :class:`StageError`. Where the device lacks a library
    the version needs (runner exit 8: CLBlast absent, no image support) the run is *skipped*:
    see :func:`_skip`."""
    cfg, R = p["config"], Path(results)
    dev, ms = cfg["device"], cfg["measure"]
    rdir = R / "runs" / p["device"] / p["run_id"]
    rdir.mkdir(parents=True, exist_ok=True)
    write_json(p, rdir / "params.json")
    t = _transport(dev, R)
    show = progress
    argv = ["./runner", "run", "--plan", f"plans/{p['run_id']}/plan.json", "--root", ".",
            "--threads", str(ms["threads"])] + (["--progress"] if show else [])
    if p["kernel"]:
        argv += _selectors(dev)
    marker = rdir / "failed.json"
    marker.unlink(missing_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=rdir, prefix=".train-"))
    try:
        with t.lock():
            for rep in range(ms["repeats"]):
                if ms["cooldown_s"] > 0:
                    time.sleep(ms["cooldown_s"])
                out_rel = f"out/{p['run_id']}.r{rep}"
                conditions = _conditions_before(t, ms)
                t.run(["rm", "-rf", out_rel], timeout_s=60)  # no stale output can pass as new
                res = t.run(argv + ["--out", out_rel], timeout_s=timeout_s)
                if show and res.stderr and not getattr(t, "streams_stderr", False):
                    sys.stderr.write(res.stderr)
                if res.returncode == _NO_LIBRARY:  # issue 6: skipped with the reason
                    return _skip(p, tmp, rdir, _last_line(res.stderr))
                if res.returncode != 0:
                    reason = f"device '{dev['name']}', run {p['run_id']}: " + \
                        _fail_text(res, "runner run")
                    write_json({"reason": reason, "log": res.stderr[-20000:]}, marker)
                    raise StageError(reason)
                got = tmp / ("main" if rep == 0 else f"repeat_{rep}")
                t.pull(out_rel, got, RUN_EXPECT)
                if conditions is not None:
                    write_json(conditions | {"after": t.readings()}, got / "device.json")
        verify = verify_run(R, p, tmp / "main")
        write_json(verify, tmp / "main" / "verify.json")
        _install(tmp, rdir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rdir


_NO_LIBRARY = 8  # phonetrain.runner.ExitCode.NO_LIBRARY (src/runner/util.h)
TRACE_HEADER = ("iteration,warmup,seq,step,op,kind,name,layer,phase,bytes,flops,queued_ns,"
                "submit_ns,start_ns,end_ns,host_begin_ns,host_end_ns\n")
"""The header line of the runner's ``trace.csv`` (src/runner/trace.c, ``trace_csv``)."""


def _last_line(text: str | None) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else "the device lacks a library this kernel version needs"


def _skip(p: dict[str, Any], tmp: Path, rdir: Path, reason: str) -> Path:
    """Record a run the device cannot do (runner exit 8) as skipped, not failed: the rule's
    outputs, installed atomically -- ``run.json`` (``status: skipped``, ``reason``), a
    ``trace.csv`` with only the runner's header, ``verify.json`` (``skipped: true``) -- so the
    job succeeds without anything that looks like a measurement."""
    main = tmp / "main"
    main.mkdir(parents=True, exist_ok=True)
    doc = {"status": "skipped", "reason": reason, "run_id": p["run_id"],
           "device": p["device"], "kernel": p["kernel"]}
    (main / "trace.csv").write_text(TRACE_HEADER)
    write_json({"skipped": True, "ok": None, "max_abs_err": None, "reason": reason},
               main / "verify.json")
    write_json(doc, main / "run.json")
    _install(tmp, rdir)
    click.echo(f"phonetrain: run {p['device']}/{p['run_id']} skipped: {reason}", err=True)
    return rdir


def is_skipped(run_json: str | Path) -> str | None:
    """The reason a run was skipped (its ``run.json`` says ``status: skipped``), else None."""
    doc = read_json(run_json)
    return (doc.get("reason") or "skipped") if doc.get("status") == "skipped" else None


def _conditions_before(t: Any, ms: dict[str, Any]) -> dict[str, Any] | None:
    """Devices with sensors (adb): wait for the cool-down (measure.cooldown_threshold_c,
    cooldown_limit_s), then record facts and readings (docs/device-sensors.md); None else."""
    if not hasattr(t, "cooldown"):
        return None
    from phonetrain.devices.adb import Cooldown
    cd = t.cooldown(Cooldown(ms.get("cooldown_threshold_c", 45.0),
                             ms.get("cooldown_limit_s", 120.0)))
    return {"facts": t.facts(), "cooldown": cd, "before": t.readings()}


def _install(tmp: Path, rdir: Path) -> None:
    """Move a finished run into its folder: extra repeats, dumps, then run.json last."""
    for old in list(rdir.glob("repeat_*")) + [rdir / "dumps"]:
        shutil.rmtree(old, ignore_errors=True)
    for d in sorted(tmp.glob("repeat_*")):
        os.replace(d, rdir / d.name)
    main = tmp / "main"
    for f in sorted(main.iterdir(), key=lambda f: f.name == "run.json"):
        os.replace(f, rdir / f.name)


def verify_run(results: Path, p: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """Compare the runner's losses and dumped tensors with the numpy reference on the same
    plan and data: ``{"max_abs_err", "atol", "ok", ...}``."""
    from phonetrain import reference
    from phonetrain.plan import Plan
    plan = Plan.load(Path(results) / "plans" / p["run_id"] / "plan.json")
    doc = dict(reference.verify_run_dir(plan, Path(results), out_dir))
    doc["atol"] = p["verify_atol"]  # measure.verify_atol is the one tolerance the study uses
    err = doc.get("max_abs_err")
    doc["ok"] = bool(err is not None and err <= doc["atol"])
    return doc


def bandwidth(p: dict[str, Any], out_csv: Path, results: Path, timeout_s: float = 600.0) -> Path:
    """Host<->device bandwidth sweep on one device (runner ``bench-bandwidth``) -> CSV (and
    the runner's ``bench.json`` with launch latency beside it)."""
    out_csv = Path(out_csv)
    dev = p["device_config"]
    t = _transport(dev, Path(results))
    with tempfile.TemporaryDirectory(prefix="phonetrain-bw-") as tmp, t.lock():
        t.push(Path(results) / "build" / dev["name"] / "runner", "runner")
        out_rel = "out/bandwidth"
        t.run(["rm", "-rf", out_rel], timeout_s=60)
        res = t.run(["./runner", "bench-bandwidth", "--out", out_rel, "--max-bytes",
                     str(p["bandwidth_max_bytes"])] + _selectors(dev), timeout_s=timeout_s)
        if res.returncode != 0:
            raise StageError(f"device '{dev['name']}': {_fail_text(res, 'bench-bandwidth')}")
        t.pull(out_rel, Path(tmp) / "bw", expect=["bandwidth.csv"])
        out_csv.parent.mkdir(parents=True, exist_ok=True)
        extra = Path(tmp) / "bw" / "bench.json"  # launch latency, beside the CSV
        if extra.exists():
            shutil.copyfile(extra, out_csv.with_name("bench.json"))
        tmpcsv = out_csv.with_name(f".{out_csv.name}.tmp")
        shutil.copyfile(Path(tmp) / "bw" / "bandwidth.csv", tmpcsv)
        os.replace(tmpcsv, out_csv)
    return out_csv


def perfetto(run_json: Path, trace_csv: Path, out: Path, device: str, title: str) -> Path:
    """A run's command trace as Chrome/Perfetto trace-event JSON (phonetrain.results.profiling)."""
    from phonetrain.results import aggregate
    from phonetrain.results import profiling
    if is_skipped(run_json):  # nothing ran: a valid trace with no events
        profiling.write_json_atomic({"traceEvents": [], "displayTimeUnit": "ns",
                                     "otherData": {"title": title, "device": device,
                                                   "skipped": is_skipped(run_json)}}, Path(out))
        return Path(out)
    tr = profiling.read_trace_csv(trace_csv)
    it = aggregate.run_iterations(aggregate.read_json(Path(run_json)), str(run_json))
    profiling.write_json_atomic(profiling.perfetto_trace(tr, it, title=title, device=device),
                                Path(out))
    return Path(out)


# ---------------------------------------------------------------- one experiment, no Snakemake

def run_single(sweep: Sweep, exp: Experiment) -> Path:
    """Every stage of one experiment in order, writing the files the workflow writes;
    returns the run folder. Each stage is redone (this path is for one-off runs; Snakemake
    does the incremental bookkeeping)."""
    R = Path(sweep.results_dir)
    jp = job_params(sweep)
    ms = sweep.root["measure"]
    bdir = R / "build" / exp.device
    build_runner(jp["device"][exp.device], bdir / "runner")
    if exp.is_opencl:
        build_kernels(jp["kernel"][(exp.device, exp.kernel)],
                      bdir / "kernels" / exp.kernel / "build.json", R, ms["timeout_s"])
    pc = jp["plan"][exp.id]
    write_data(jp["data"][pc["data_dir"]], R)
    lower(pc, R)
    rp = jp["run"][(exp.device, exp.id)]
    deploy(rp, pc["data_dir"], R / "deploy" / exp.device / f"{exp.id}.json", R)
    return train(rp, R, ms["timeout_s"], ms["progress"])


@click.command("run", context_settings={"ignore_unknown_options": True})
@click.argument("overrides", nargs=-1)
@click.option("--conf", "conf_dir", type=click.Path(file_okay=False), default=None,
              help="Hydra config folder (default: conf/ of this checkout).")
def run_command(overrides: tuple[str, ...], conf_dir: str | None) -> None:
    """Run one experiment without Snakemake: OVERRIDES are Hydra overrides, e.g.
    `phonetrain run model=lenet5 device=host backend=opencl kernel=baseline
    measure.iterations=5`. Writes the same files as the workflow (results/runs/...)."""
    from phonetrain.config import CONF_DIR, ConfigError, compose_one
    try:
        sweep, exp = compose_one(list(overrides), conf_dir or CONF_DIR)
    except ConfigError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"phonetrain run: {exp.id} on {exp.device} (config {exp.config_hash})", err=True)
    try:
        rdir = run_single(sweep, exp)
    except Exception as e:
        if not isinstance(e, _expected_errors()):
            raise
        raise click.ClickException(str(e)) from None
    reason = is_skipped(rdir / "run.json")
    if reason:
        click.echo(f"{rdir}: skipped: {reason}")
        return
    v = read_json(rdir / "verify.json")
    click.echo(f"{rdir}: verify max_abs_err {v.get('max_abs_err'):.3g} "
               f"({'ok' if v.get('ok') else 'WRONG'})")


STAGES = {"build-runner": build_runner, "build-kernels": build_kernels, "data": write_data,
          "lower": lower, "deploy": deploy, "train": train, "bandwidth": bandwidth,
          "perfetto": perfetto}


def _expected_errors() -> tuple[type[Exception], ...]:
    """Errors a stage reports as one message (no traceback): bad data files, kernel versions
    and plans too. RunnerError/LowerError only when their (heavier) modules were imported."""
    from phonetrain.data import DatasetError
    from phonetrain.kernels import KernelVersionError
    errs: tuple[type[Exception], ...] = (StageError, TransportError, DatasetError,
                                         KernelVersionError)
    for mod, name in (("phonetrain.runner", "RunnerError"),
                      ("phonetrain.lowering.spec", "LowerError")):
        if mod in sys.modules:
            errs += (getattr(sys.modules[mod], name),)
    return errs


def _arg(a: str) -> Any:
    """A command-line stage argument: JSON (dicts, numbers, booleans) or a plain string."""
    try:
        return json.loads(a)
    except ValueError:
        return a


def main(argv: list[str]) -> int:
    """``python -m phonetrain.experiment STAGE LOG ARGS...``: one stage in its own light
    process (how the Snakemake rules run them); ARGS are JSON or plain strings. Exit status 1
    with one message on stderr on a stage failure."""
    if len(argv) < 2 or argv[0] not in STAGES:
        print(f"usage: python -m phonetrain.experiment {{{','.join(STAGES)}}} LOG ARGS...",
              file=sys.stderr)
        return 2
    try:
        job(argv[0], argv[1], *[_arg(a) for a in argv[2:]])
    except StageError as e:
        print(f"phonetrain {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C in the terminal reaches every job: one line each
        print(f"phonetrain {argv[0]}: interrupted; rerun snakemake to redo this "
              "job", file=sys.stderr)
        return 130
    return 0


def job(stage: str, log: str | Path, *args: Any, **kwargs: Any) -> None:
    """Run one stage inside a Snakemake job (its ``run:`` block); the outcome goes to the job's
    log, and a failure is re-raised as :class:`StageError` whose message (runner stderr or
    compiler log included) Snakemake prints."""
    log = Path(log)
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    try:
        STAGES[stage](*args, **kwargs)
    except Exception as e:
        if not isinstance(e, _expected_errors()):
            raise
        log.write_text(f"{stage}: FAILED\n{e}\n")
        raise StageError(f"{stage}: {e}") from None
    log.write_text(f"{stage}: ok in {time.monotonic() - t0:.2f} s\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
