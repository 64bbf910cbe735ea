"""Workflow stages of the GEMM study (rules/gemm.smk): tune, bench-gemm, bench-peak on a
device through its transport, tuned plans for deploy, and the ``gemm``/``peaks`` tables.

Files (under ``results/``):

- the GEMM params dict (:func:`gemm_params`): the sweep's GEMM shapes (every model's training
  step, lowered), the square sizes and the ``measure.gemm_*``/``tune*`` settings; the rules
  pass it as Snakemake ``params`` (with the device or kernel params dict), so a change reruns
  tuning and the GEMM sweep, nothing else;
- ``build/<device>/kernels/<version>/tuning.json``: :mod:`phonetrain.kernels.tuning`'s document;
- ``gemm/<device>/<version>.json`` (``cpu`` = the runner's CPU backend) and
  ``peaks/<device>.json``: measurements, turned into the summary tables by
  :func:`read_gemm` / :func:`read_peaks` (schemas ``gemm`` and ``peaks`` in
  :mod:`phonetrain.results.schema`).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from phonetrain.kernels import gemm
from phonetrain.kernels import tuning
from phonetrain.kernels.gemm import BenchError, GemmShape

CPU = "cpu"


def sweep_shapes(sweep) -> list[dict[str, Any]]:
    """Distinct GEMM calls of every model's training step at its batch size:
    ``[{"kernel", "M", "N", "K", "source": "model:<name>"}]`` (first model wins a tie)."""
    from phonetrain.lowering import LowerSpec, lower
    out: dict[GemmShape, str] = {}
    for name, mcfg in sweep.members["model"].items():
        plan = lower(LowerSpec(model=name, batch_size=int(mcfg["batch_size"]), backend="opencl",
                               placement="resident", transfer="copy", kernel="baseline"))
        for g in gemm.plan_shapes(plan):
            out.setdefault(g, f"model:{name}")
    return [{"kernel": g.kernel, "M": g.M, "N": g.N, "K": g.K, "source": s}
            for g, s in out.items()]


def gemm_params(sweep) -> dict[str, Any]:
    """What the tune/gemm/peaks jobs depend on besides the device and kernel version."""
    ms = sweep.root["measure"]
    return {"shapes": sweep_shapes(sweep), "sizes": sorted(int(n) for n in ms["gemm_sizes"]),
            "min_time_ms": float(ms["gemm_min_time_ms"]),
            "max_launch_s": float(ms["gemm_max_launch_s"]), "tune": bool(ms["tune"]),
            "tune_min_time_ms": float(ms["tune_min_time_ms"]), "threads": int(ms["threads"])}


def device_params(sweep, device: str) -> dict[str, Any]:
    """``{"device", "device_config"}`` of one sweep device (its facts left out)."""
    dcfg = sweep.members["device"][device]
    return {"device": device, "device_config": {k: v for k, v in dcfg.items() if k != "facts"}}


def kernel_params(sweep, device: str, kernel: str) -> dict[str, Any]:
    """Device params plus the kernel version and its resolved sources' hash."""
    from phonetrain.experiment import kernel_hash
    return {**device_params(sweep, device), "kernel": kernel, "kernel_hash": kernel_hash(kernel)}


def _shapes(p: dict[str, Any]) -> list[GemmShape]:
    return [GemmShape(s["kernel"], s["M"], s["N"], s["K"]) for s in p["shapes"]]


class _Device:
    """One device's transport with the runner and a kernel version pushed; runs specs."""

    def __init__(self, dev: dict[str, Any], results: Path, version: str | None):
        from phonetrain.experiment import _selectors, _transport
        from phonetrain.kernels import stage_kernels
        self.dev, self.results, self.version = dev, Path(results), version
        self.t = _transport(dev, self.results)
        self.sel = _selectors(dev)
        self.tmp = tempfile.TemporaryDirectory(prefix="phonetrain-gemm-")
        self.t.push(self.results / "build" / dev["name"] / "runner", "runner")
        if version:
            self.t.push(stage_kernels(version, Path(self.tmp.name)), f"kernels/{version}")
        self.n = 0

    def run(self, mode: str, args: list[str], expect: str, timeout_s: float) -> dict[str, Any]:
        self.n += 1
        out_rel = f"out/gemm-{self.version or mode}-{self.n}"
        res = self.t.run(["./runner", mode, *args, "--out", out_rel, *self.sel],
                         timeout_s=timeout_s)
        if res.returncode != 0:
            tail = "\n".join((res.stderr or "").strip().splitlines()[-30:])
            raise BenchError(f"device '{self.dev['name']}': runner {mode} exited with status "
                             f"{res.returncode}:\n{tail}")
        local = Path(self.tmp.name) / f"pulled-{self.n}"
        self.t.pull(out_rel, local, expect=[expect])
        return json.loads((local / expect).read_text())

    def run_spec(self, spec: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        self.n += 1
        f = Path(self.tmp.name) / f"spec-{self.n}.json"
        f.write_text(json.dumps(spec))
        self.t.push(f, f"specs/{f.name}")
        return self.run("bench-gemm", ["--spec", f"specs/{f.name}"], "gemm.json", timeout_s)


def tune_stage(p: dict[str, Any], gp: dict[str, Any], out_json: Path, results: Path,
               timeout_s: float = 600.0) -> dict:
    """Tune one version on one device (``p``: :func:`kernel_params`, ``gp``:
    :func:`gemm_params`; ``tune`` false: the version.yaml default is the only candidate,
    still checked) and write ``tuning.json``."""
    from phonetrain.kernels import load_version
    version = load_version(p["kernel"])
    dev = _Device(p["device_config"], results, version.name)
    with dev.t.lock():
        doc = tuning.tune(version, _shapes(gp), lambda spec: dev.run_spec(spec, timeout_s),
                          source=f"kernels/{version.name}/gemm.cl",
                          min_time_ms=gp["tune_min_time_ms"], defaults_only=not gp["tune"])
    doc.update(device=p["device"], kernel_hash=p["kernel_hash"])
    tuning.write_tuning(doc, out_json)
    return doc


def gemm_stage(p: dict[str, Any], gp: dict[str, Any], version: str, out_json: Path,
               results: Path, tuning_json: Path | None = None, timeout_s: float = 600.0) -> dict:
    """GFLOPS of one version (or ``cpu``) on one device (``p``: :func:`device_params`): the
    models' GEMM shapes, then square sizes ascending until one launch would exceed
    ``max_launch_s``. A tuned version uses its tuning.json configuration per shape class."""
    from phonetrain.experiment import write_json
    from phonetrain.kernels import load_version
    kv = None if version == CPU else load_version(version)
    tuned = tuning.load_tuning(tuning_json) if tuning_json else None
    groups: list[tuple[str, list[GemmShape]]] = []
    for s in gp["shapes"]:
        groups.append((s["source"], [GemmShape(s["kernel"], s["M"], s["N"], s["K"])]))
    groups += [("square", [GemmShape("gemm_nn", n, n, n)]) for n in sorted(gp["sizes"])]
    dev = _Device(p["device_config"], results, version if kv else None)
    rows: list[dict[str, Any]] = []
    doc_out = {"device": p["device"], "version": version, "status": "ok", "rows": rows}
    last_gflops = None
    with dev.t.lock():
        for source, shapes in groups:
            g = shapes[0]
            if source == "square" and last_gflops and \
                    g.flops / (last_gflops * 1e9) > gp["max_launch_s"]:
                rows.append({"kernel": g.kernel, "M": g.M, "N": g.N, "K": g.K, "source": source,
                             "status": "skipped", "error": "estimated launch time over "
                             "measure.gemm_max_launch_s"})
                continue
            v, cls = kv, None
            if tuned and tuned["classes"] and kv is not None:
                cls = tuning.shape_class(g)
                cls = cls if cls in tuned["classes"] else tuned["default"]
                v = tuning.candidate_version(kv, tuned["classes"][cls])
            spec = gemm.gemm_spec(v, shapes, source=f"kernels/{version}/gemm.cl",
                                  backend="cpu" if kv is None else "opencl",
                                  min_time_ms=gp["min_time_ms"], repeats=5,
                                  threads=gp["threads"])
            doc = dev.run_spec(spec, timeout_s)
            if doc.get("status") == "skipped":
                doc_out.update(status="skipped", reason=doc.get("reason", ""))
                break
            doc_out["device_info"] = doc.get("device") or {}
            for c in doc["cases"]:
                rows.append({**{k: c.get(k) for k in ("kernel", "M", "N", "K", "global", "local",
                                                      "status", "error", "gflops", "median_ms",
                                                      "max_err", "iterations")},
                             "source": source, "options": doc.get("options", ""),
                             "tuned_class": cls})
                if source == "square" and c["status"] == "ok":
                    last_gflops = c["gflops"]
    if kv is not None:
        from phonetrain.experiment import kernel_hash
        doc_out["kernel_hash"] = kernel_hash(version)
    write_json(doc_out, Path(out_json))
    return doc_out


def peaks_stage(p: dict[str, Any], out_json: Path, results: Path,
                timeout_s: float = 600.0) -> dict:
    """The device's peak compute and bandwidth (runner bench-peak) -> ``peaks.json``."""
    from phonetrain.experiment import write_json
    dev = _Device(p["device_config"], results, None)
    with dev.t.lock():
        doc = dev.run("bench-peak", ["--min-time-ms", "50"], "peaks.json", timeout_s)
    doc["device_id"] = p["device"]
    write_json(doc, Path(out_json))
    return doc


def tuned_plan_dir(plan_dir: Path, version: str, tuning_json: Path, dest: Path) -> Path:
    """A copy of a lowered plan folder whose plan.json uses the device's tuned configuration
    (:func:`phonetrain.kernels.tuning.tune_plan`); the class chosen is recorded in ``tuning.txt``."""
    import shutil
    from phonetrain.kernels import load_version
    from phonetrain.plan import Plan
    dest = Path(dest)
    shutil.copytree(plan_dir, dest, dirs_exist_ok=True)
    plan, cls = tuning.tune_plan(Plan.load(dest / "plan.json"), load_version(version),
                                 tuning.load_tuning(tuning_json))
    plan.save(dest / "plan.json")
    (dest / "tuning.txt").write_text(f"{tuning_json}: class {cls}\n")
    return dest


# ---------------------------------------------------------------- summary tables

def _prov(doc: dict[str, Any], device_info: dict[str, Any], params: dict[str, Any]) -> dict:
    from phonetrain.results.aggregate import device_fingerprint, git_rev, short_hash
    return {"config_hash": short_hash(params), "kernel_hash": doc.get("kernel_hash"),
            "runner_hash": None, "device_fingerprint": device_fingerprint(device_info),
            "git_rev": git_rev()}


def read_gemm(path: str | Path) -> pd.DataFrame:
    """Rows of the ``gemm`` table from one ``gemm/<device>/<version>.json``; a skipped
    version (CLBlast absent) gives one row with status ``skipped`` and the reason."""
    doc = json.loads(Path(path).read_text())
    info = doc.get("device_info") or {}
    prov = _prov(doc, info, {"device": doc["device"], "version": doc["version"]})
    base = {"device": doc["device"], "kernel": doc["version"],
            "device_name": info.get("name"), "platform_name": info.get("platform")}
    if doc.get("status") == "skipped":
        from phonetrain.results.schema import schema
        row = {f.name: None for f in schema("gemm")}
        row.update(base, status="skipped", status_reason=doc.get("reason"), **prov)
        return pd.DataFrame([row])
    rows = [{**base, "gemm": r["kernel"], "m": r["M"], "n": r["N"], "k": r["K"],
             "shape_source": r["source"], "status": r["status"],
             "status_reason": r.get("error"), "options": r.get("options"),
             "global_size": json.dumps(r.get("global")), "local_size": json.dumps(r.get("local")),
             "tuned_class": r.get("tuned_class"), "gflops": r.get("gflops"),
             "median_ms": r.get("median_ms"), "max_err": r.get("max_err"),
             "iterations": r.get("iterations"), **prov} for r in doc["rows"]]
    return pd.DataFrame(rows)


def read_peaks(path: str | Path) -> pd.DataFrame:
    """Rows of the ``peaks`` table from one ``peaks/<device>.json``."""
    doc = json.loads(Path(path).read_text())
    df = gemm.peaks_frame(doc)
    info = doc.get("device") or {}
    prov = _prov(doc, info, {"device": doc.get("device_id")})
    df = df.rename(columns={"name": "name", "device": "device_name",
                            "platform": "platform_name"})
    df.insert(0, "device", doc.get("device_id"))
    for k, v in prov.items():
        df[k] = v
    return df


def _stage(fn):
    """Adapt a stage to ``phonetrain.experiment.job``: failures become StageError."""
    def run(*args: Any, **kwargs: Any) -> Any:
        from phonetrain.experiment import StageError
        try:
            return fn(*args, **kwargs)
        except (BenchError, tuning.TuningError, ValueError) as e:
            raise StageError(str(e)) from None
    return run


STAGES = {"tune": _stage(tune_stage), "gemm": _stage(gemm_stage), "peaks": _stage(peaks_stage)}
"""Stages for ``phonetrain.experiment.job`` (rules/gemm.smk registers them)."""


def tunable(version: str) -> bool:
    """True when the version has tuning candidates besides its defaults
    (:func:`phonetrain.kernels.tuning.tunable`)."""
    return tuning.tunable(version)
