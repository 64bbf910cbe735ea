"""One experiment end to end -- lower, deploy, build, run, verify -- without Snakemake.

The Snakemake rules call the stage functions below one job at a time (through
``python -m phonetrain.experiment <stage> PARAMS OUT``); ``phonetrain run`` calls
:func:`run_single`, which chains the same functions, so both write the same files.

Every stage reads one *params file* (JSON written by :func:`write_params` only when its
content changes, so Snakemake's mtime check reruns exactly what a config change touches):

- ``results/build/<device>/params.json``: the device config (runner build, bandwidth sweep);
- ``results/build/<device>/kernels/<version>/params.json``: one kernel version on one device;
- ``results/config/<data dir>.json`` (``results/config/data/<dataset>/b<batch>.json``): one dataset split into batches;
- ``results/config/plans/<experiment id>.json``: what the lowered plan depends on;
- ``results/runs/<device>/<experiment id>/params.json``: one run (the aggregate reads it).

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
from typing import Any

import click

from phonetrain.config import REPO_ROOT, Experiment, Sweep, plan_config, write_if_changed
from phonetrain.devices import TransportError, get_transport

RUNNER_SOURCES_DIR = REPO_ROOT / "src" / "runner"
RUN_EXPECT = ["run.json", "trace.csv"]


class StageError(RuntimeError):
    """A stage that failed; the message names the device/experiment and the cause."""


# ---------------------------------------------------------------- params files

def run_dir(results: Path, exp: Experiment) -> Path:
    return Path(results) / "runs" / exp.device / exp.id


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


def run_params(exp: Experiment) -> dict[str, Any]:
    """``params.json`` of a run folder: identity and settings read by
    :func:`phonetrain.aggregate.read_run`, plus the full config under ``config``."""
    c = exp.config
    b = c["backend"]
    return {
        "run_id": exp.id, "model": exp.model, "device": exp.device, "backend": exp.backend,
        "placement": None if b["kind"] == "cpu" else b["placement"],
        "transfer": None if b["kind"] == "cpu" else b["transfer"],
        "kernel": None if b["kind"] == "cpu" else exp.kernel,
        "dataset": dataset_of(exp), "batch_size": c["model"]["batch_size"],
        "warmup": c["measure"]["warmup"], "iterations": c["measure"]["iterations"],
        "threads": c["measure"]["threads"], "verify_atol": c["measure"]["verify_atol"],
        "config_hash": exp.config_hash,
        "kernel_hash": kernel_hash(exp.kernel) if exp.is_opencl else None,
        "config": c,
    }


def write_params(sweep: Sweep) -> dict[str, Any]:
    """Write every params file of the sweep (only those whose content changed) and return
    ``{"data": {ddir: params}, "plan_data": {exp_id: ddir}}`` for the Snakefile."""
    R = Path(sweep.results_dir)
    for d, dcfg in sweep.members["device"].items():
        dev = {k: v for k, v in dcfg.items() if k != "facts"}
        write_if_changed(R / "build" / d / "params.json",
                         {"device": d, "device_config": dev, "measure": sweep.root["measure"]})
        write_if_changed(R / "config" / "facts" / f"{d}.json", {"device": d, **dcfg["facts"]})
        for k in sweep.kernels:
            write_if_changed(R / "build" / d / "kernels" / k / "params.json",
                             {"device": d, "kernel": k, "kernel_hash": kernel_hash(k),
                              "device_config": dev, "measure": sweep.root["measure"]})
    data: dict[str, dict[str, Any]] = {}
    plan_data: dict[str, str] = {}
    for exp in sweep.experiments:
        pc = plan_config(exp)
        ddir = data_dir_rel(dataset_of(exp), pc["model"]["batch_size"], exp.model)
        pc["data_dir"] = ddir
        data[ddir] = {"dataset": dataset_of(exp), "model": exp.model,
                      "batch_size": pc["model"]["batch_size"], "dir": ddir,
                      "dataset_config": exp.config["dataset"], "seed": pc["measure"]["seed"]}
        plan_data[exp.id] = ddir
        write_if_changed(R / "config" / "plans" / f"{exp.id}.json", pc)
        write_if_changed(run_dir(R, exp) / "params.json", run_params(exp))
    for ddir, p in data.items():
        write_if_changed(R / "config" / f"{ddir}.json", p)
    write_if_changed(R / "config" / "sweep.json", {
        "root": {k: v for k, v in sweep.root.items() if k in ("sweep", "report", "measure")},
        "experiments": [{"id": e.id, "device": e.device, "model": e.model,
                         "backend": e.backend, "kernel": e.kernel} for e in sweep.experiments]})
    return {"data": data, "plan_data": plan_data}


def read_json(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def write_json(obj: Any, path: Path) -> None:
    """Atomic JSON write (temp file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str) + "\n")
    tmp.replace(path)


# ---------------------------------------------------------------- stages

def build_runner(params_path: Path, out: Path) -> Path:
    """Build the runner for the device of ``params_path`` into ``out`` (atomic), with the
    device's toolchain (:mod:`phonetrain.toolchains`: host cc, Android NDK, aarch64 cross)."""
    from phonetrain import runner, toolchains
    dev = read_json(params_path)["device_config"]
    try:
        tc = toolchains.for_device(dev)
    except toolchains.ToolchainError as e:
        raise StageError(str(e)) from None
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".runner-") as tmp:
        built = runner.build_runner(Path(tmp), cc=tc.cc, extra_flags=tc.extra_flags)
        os.replace(built, out)
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


def build_kernels(params_path: Path, out_json: Path, results: Path) -> dict[str, Any]:
    """Compile one kernel version on one device with the runner's ``build`` mode; write
    ``build.json`` (per-program build time, log, binary size). A compile error raises
    :class:`StageError` with the compiler log (and leaves no build.json)."""
    from phonetrain.kernels import load_version, stage_kernels
    p = read_json(params_path)
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
            res = t.run(argv, timeout_s=p["measure"]["timeout_s"])
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
    write_json(doc, out_json)
    return doc


def _mark_runs_failed(results: Path, device: str, version: str, reason: str, log: str) -> None:
    """Leave ``failed.json`` (reason + compiler log) in every run folder of this version on
    this device, so the aggregate reports why those runs are missing."""
    for params in (results / "runs" / device).glob(f"*.*.{version}/params.json"):
        write_json({"reason": reason, "log": log[-20000:]}, params.parent / "failed.json")


def write_data(params_path: Path, results: Path) -> Path:
    """Write one dataset's batch files under ``results/<data dir>`` (the phonetrain.data
    layout) for the model and batch size in ``params_path``."""
    from phonetrain import data as datasets
    from phonetrain.models import get_model
    p = read_json(params_path)
    m = get_model(p["model"])
    dcfg = p["dataset_config"]
    opts: dict[str, Any] = {}
    if dcfg.get("path"):
        opts["folder"] = dcfg["path"]
    if dcfg.get("allow_download"):
        opts["download"] = True
    datasets.write_batches(p["dataset"], p["batch_size"], dcfg["num_batches"], Path(results),
                           seed=p["seed"], input_shape=m.input_shape, classes=m.classes, **opts)
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


def lower(params_path: Path, results: Path) -> Path:
    """Lower one plan into ``results/plans/<experiment id>/`` (atomic); returns the folder."""
    from phonetrain.lowering import write_plan_dir
    return write_plan_dir(lower_spec(read_json(params_path)), Path(results))


def deploy(params_path: Path, manifest: Path, results: Path) -> dict[str, Any]:
    """Push the runner, the plan, its data and (OpenCL) the kernel sources to the device's
    staging root; write a manifest of what is there. Unchanged files are not re-sent."""
    from phonetrain.kernels import stage_kernels
    p = read_json(params_path)
    cfg, R = p["config"], Path(results)
    dev = cfg["device"]
    t = _transport(dev, R)
    ddir = read_json(R / "config" / "plans" / f"{p['run_id']}.json")["data_dir"]
    sent = {}
    with t.lock():
        sent["runner"] = t.push(R / "build" / dev["name"] / "runner", "runner")
        sent["plan"] = t.push(R / "plans" / p["run_id"], f"plans/{p['run_id']}")
        sent["data"] = t.push(R / ddir, ddir)
        if p["kernel"]:
            with tempfile.TemporaryDirectory(prefix="phonetrain-kernels-") as tmp:
                src = stage_kernels(p["kernel"], Path(tmp))
                sent["kernels"] = t.push(src, f"kernels/{p['kernel']}")
    doc = {"device": dev["name"], "run_id": p["run_id"], "files_sent": sent,
           "plan": f"plans/{p['run_id']}/plan.json", "data": ddir}
    write_json(doc, manifest)
    return doc


def train(params_path: Path, results: Path, progress: bool | None = None) -> Path:
    """Run one experiment on its device (under the device's lock), ``repeats`` times, and
    verify it against the numpy reference. Writes into the run folder (beside params.json):
    ``run.json``, ``trace.csv``, ``dumps/`` (repeat 0), ``repeat_<k>/`` (more repeats) and
    ``verify.json``. Raises :class:`StageError` when the runner fails."""
    p = read_json(params_path)
    cfg, R = p["config"], Path(results)
    dev, ms = cfg["device"], cfg["measure"]
    rdir = Path(params_path).parent
    t = _transport(dev, R)
    show = ms["progress"] if progress is None else progress
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
                res = t.run(argv + ["--out", out_rel], timeout_s=ms["timeout_s"])
                if show and res.stderr and not getattr(t, "streams_stderr", False):
                    sys.stderr.write(res.stderr)
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


def bandwidth(params_path: Path, out_csv: Path, results: Path) -> Path:
    """Host<->device bandwidth sweep on one device (runner ``bench-bandwidth``) -> CSV."""
    p = read_json(params_path)
    dev, ms = p["device_config"], p["measure"]
    t = _transport(dev, Path(results))
    with tempfile.TemporaryDirectory(prefix="phonetrain-bw-") as tmp, t.lock():
        t.push(Path(results) / "build" / dev["name"] / "runner", "runner")
        out_rel = "out/bandwidth"
        t.run(["rm", "-rf", out_rel], timeout_s=60)
        res = t.run(["./runner", "bench-bandwidth", "--out", out_rel, "--max-bytes",
                     str(ms["bandwidth_max_bytes"])] + _selectors(dev),
                    timeout_s=ms["timeout_s"])
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


# ---------------------------------------------------------------- one experiment, no Snakemake

def run_single(sweep: Sweep, exp: Experiment) -> Path:
    """Every stage of one experiment in order, writing the files the workflow writes;
    returns the run folder. Stages whose output is newer than its params are still redone
    (this path is for one-off runs; Snakemake does the incremental bookkeeping)."""
    R = Path(sweep.results_dir)
    maps = write_params(sweep)
    bdir = R / "build" / exp.device
    bdir.mkdir(parents=True, exist_ok=True)
    build_runner(bdir / "params.json", bdir / "runner")
    if exp.is_opencl:
        kdir = bdir / "kernels" / exp.kernel
        build_kernels(kdir / "params.json", kdir / "build.json", R)
    ddir = maps["plan_data"][exp.id]
    write_data(R / "config" / f"{ddir}.json", R)
    lower(R / "config" / "plans" / f"{exp.id}.json", R)
    rdir = run_dir(R, exp)
    deploy(rdir / "params.json", R / "deploy" / exp.device / f"{exp.id}.json", R)
    return train(rdir / "params.json", R)


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
    except (StageError, TransportError) as e:
        raise click.ClickException(str(e)) from None
    v = read_json(rdir / "verify.json")
    click.echo(f"{rdir}: verify max_abs_err {v.get('max_abs_err'):.3g} "
               f"({'ok' if v.get('ok') else 'WRONG'})")


STAGES = {
    "build-runner": lambda a: build_runner(Path(a[0]), Path(a[1])),
    "build-kernels": lambda a: build_kernels(Path(a[0]), Path(a[1]), Path(a[2])),
    "data": lambda a: write_data(Path(a[0]), Path(a[1])),
    "lower": lambda a: lower(Path(a[0]), Path(a[1])),
    "deploy": lambda a: deploy(Path(a[0]), Path(a[1]), Path(a[2])),
    "train": lambda a: train(Path(a[0]), Path(a[1])),
    "bandwidth": lambda a: bandwidth(Path(a[0]), Path(a[1]), Path(a[2])),
}


def main(argv: list[str]) -> int:
    """``python -m phonetrain.experiment STAGE ARGS...`` (used by the Snakemake rules)."""
    if not argv or argv[0] not in STAGES:
        print(f"usage: python -m phonetrain.experiment {{{','.join(STAGES)}}} ARGS...",
              file=sys.stderr)
        return 2
    try:
        STAGES[argv[0]](argv[1:])
    except (StageError, TransportError) as e:
        print(f"phonetrain {argv[0]}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
