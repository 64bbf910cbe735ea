"""Per-device raw files -> rows of the ``bandwidth``, ``builds``, ``gemm`` and ``peaks``
tables (schemas: :mod:`phonetrain.results.schema`).

- ``bandwidth/<device>/bandwidth.csv`` (runner ``bench-bandwidth``; ``bench.json`` beside it);
- ``build/<device>/kernels/<version>/build.json`` (runner ``build``; ``params.json`` beside it);
- ``gemm/<device>/<version>.json`` and ``peaks/<device>.json`` (the GEMM study's stages).

Every reader raises :class:`~phonetrain.errors.ResultsFileError` naming the file when it
cannot be read.
"""

from __future__ import annotations

import json
import math
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pandas as pd

from phonetrain import layout
from phonetrain.errors import ResultsFileError
from phonetrain.io import read_json, short_hash
from phonetrain.results import provenance, schema


def read_bandwidth(csv_path: str | Path) -> pd.DataFrame:
    """One ``bandwidth.csv`` of the runner's ``bench-bandwidth`` (columns ``op``,
    ``size_bytes``, ``iterations``, ``repeats``, ``device_ns``, ``host_ns``, ``device_gbps``,
    ``host_gbps``) -> bandwidth rows. The device is the folder's name (``bandwidth/<device>/``)
    unless a ``params.json`` beside it names it; ``bench.json`` beside it (the runner's device
    facts and settings) gives the runner hash and device fingerprint."""
    csv_path = Path(csv_path)
    try:
        df = pd.read_csv(csv_path).rename(columns={"op": "kind"})
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise ResultsFileError(f"{csv_path}: cannot read: {e}") from None
    for c in ("kind", "size_bytes", "device_gbps", "host_gbps"):
        if c not in df:
            raise ResultsFileError(f"{csv_path}: missing column {c!r} (rerun the bandwidth stage)")
    params = _side_params(csv_path)
    bench_path = csv_path.with_name("bench.json")
    bench = read_json(bench_path) if bench_path.exists() else {}
    settings = {"device": params["device"], "bench": {k: v for k, v in bench.items()
                                                      if k in ("min_time_ms", "repeats")}}
    params.setdefault("config_hash", short_hash(settings))
    prov = provenance.columns({**params, "kernel_hash": None}, bench)
    for c in ("host_gbps_low", "host_gbps_high"):   # older runners record no interval
        if c not in df:
            df[c] = math.nan
    return schema.frame(df.assign(device=params["device"], **prov), "bandwidth")


@contextmanager
def _shaped(path: str | Path, what: str) -> Iterator[None]:
    """Turn a missing key or a value of the wrong type met while reading the JSON object at
    ``path`` (a hand-edited or foreign file) into a :class:`ResultsFileError` naming it."""
    try:
        yield
    except KeyError as e:
        raise ResultsFileError(f"{path}: not {what} (no key {e.args[0]!r})",
                               "delete it: the next snakemake all makes it again") from None
    except (TypeError, AttributeError, ValueError) as e:
        raise ResultsFileError(f"{path}: not {what} ({e})",
                               "delete it: the next snakemake all makes it again") from None


def _side_params(path: Path) -> dict[str, Any]:
    p = path.parent / layout.PARAMS
    params = read_json(p) if p.exists() else {}
    params.setdefault("device", path.parent.name)
    return params


def read_build(json_path: str | Path) -> pd.DataFrame:
    """One ``build.json`` of the runner's ``build`` mode (``programs: [{program, status,
    error, build_ms, binary_size_bytes, log}]``, ``options``, ``device``, ``kernel``,
    ``kernel_hash``, ``runner``) plus its ``params.json`` -> one builds row per program."""
    json_path = Path(json_path)
    doc = read_json(json_path)
    with _shaped(json_path, "a kernel build record"):
        return _build_frame(json_path, doc)


def _build_frame(json_path: Path, doc: dict[str, Any]) -> pd.DataFrame:
    params = {**_side_params(json_path),
              **{k: doc[k] for k in ("device", "kernel", "kernel_hash") if doc.get(k)}}
    params.setdefault("kernel", json_path.parent.name)
    if "config_hash" not in params:
        params["config_hash"] = short_hash({k: params.get(k) for k in (
            "device", "kernel", "kernel_hash", "device_config")} | {"options": doc.get("options")})
    progs = doc.get("programs") or [{"program": "*", "status": doc.get("status", "failed"),
                                     "log": doc.get("log")}]
    rows = [{"device": params["device"], "kernel": params["kernel"],
             "program": p.get("program", p.get("name")),
             "status": "ok" if p.get("status", doc.get("status", "ok")) == "ok" else "failed",
             "build_ms": p.get("build_ms"), "binary_size_bytes": p.get("binary_size_bytes"),
             "log": "\n".join(x for x in (p.get("error"), p.get("log")) if x) or None,
             "options": p.get("options", doc.get("options")), "cached": p.get("cached")}
            for p in progs]
    df = pd.DataFrame(rows).assign(**provenance.columns(params, doc))
    return schema.frame(df, "builds")


def build_not_ok(json_path: str | Path, reason: str) -> pd.DataFrame:
    """The one builds row of a kernel build that is not a current, successful one (it failed,
    did not run, or was made from older sources): ``program`` ``*``, status ``failed``, the
    reason in ``log``. Device and kernel come from the path
    (``build/<device>/kernels/<kernel>/build.json``)."""
    json_path = Path(json_path)
    device, kernel = json_path.parent.parent.parent.name, json_path.parent.name
    row = {"device": device, "kernel": kernel, "program": "*", "status": "failed",
           "log": reason, "config_hash": short_hash({"device": device, "kernel": kernel}),
           "git_rev": provenance.git_rev()}
    return schema.frame([row], "builds")


def gemm_not_current(path: str | Path, reason: str) -> pd.DataFrame:
    """The one gemm row of a GEMM sweep file left from older inputs: status ``error``, the
    reason in ``status_reason``, no measurement."""
    doc = read_json(path)
    row = {f.name: None for f in schema.schema("gemm")}
    with _shaped(path, "a GEMM sweep file"):
        device, version = str(doc["device"]), str(doc["version"])
    row.update(device=device, kernel=version, status="error",
               status_reason=reason, kernel_hash=doc.get("kernel_hash"),
               config_hash=short_hash({"device": device, "version": version}),
               git_rev=provenance.git_rev())
    return pd.DataFrame([row])


# ---- everything -------------------------------------------------------------------------


def gemm_frame(doc: dict[str, Any], version: str) -> pd.DataFrame:
    """One row per case of a bench-gemm ``gemm.json``: version, kernel, M, N, K, global,
    local, options, status (ok | wrong | error | skipped), gflops, median_ms, low_ms, high_ms
    (the runner's interval of the median over the repeats; NaN from older runners), max_err,
    iterations, device, platform. A skipped run (CLBlast absent) gives an empty frame with
    ``attrs["skipped"]`` holding the reason."""
    dev = doc.get("device") or {}
    rows = []
    for c in doc.get("cases", []):
        rows.append({
            "version": version, "kernel": c["kernel"], "M": c["M"], "N": c["N"], "K": c["K"],
            "global": json.dumps(c.get("global")), "local": json.dumps(c.get("local")),
            "options": doc.get("options", ""), "status": c["status"],
            "error": c.get("error") or "", "gflops": _num(c.get("gflops")),
            "median_ms": _num(c.get("median_ms")), "low_ms": _num(c.get("low_ms")),
            "high_ms": _num(c.get("high_ms")), "max_err": _num(c.get("max_err")),
            "iterations": int(c.get("iterations") or 0),
            "device": dev.get("name", "host CPU (runner cpu backend)"),
            "platform": dev.get("platform", "")})
    df = pd.DataFrame(rows, columns=["version", "kernel", "M", "N", "K", "global", "local",
                                     "options", "status", "error", "gflops", "median_ms",
                                     "low_ms", "high_ms", "max_err", "iterations", "device",
                                     "platform"])
    if doc.get("status") == "skipped":
        df.attrs["skipped"] = doc.get("reason", "")
    return df


def peaks_frame(doc: dict[str, Any]) -> pd.DataFrame:
    """One row per bench-peak measurement: kind (compute | bandwidth), name (float..float16,
    read_float4), width, gflops (compute), gbps (bandwidth), median_ms, device, platform."""
    dev = doc.get("device") or {}
    rows = [{"kind": "compute", "name": c["type"], "width": c["width"], "gflops": c["gflops"],
             "gbps": math.nan, "median_ms": c["median_ms"]} for c in doc.get("compute", [])]
    rows += [{"kind": "bandwidth", "name": b["kernel"], "width": 4, "gflops": math.nan,
              "gbps": b["gbps"], "median_ms": b["median_ms"]} for b in doc.get("bandwidth", [])]
    df = pd.DataFrame(rows, columns=["kind", "name", "width", "gflops", "gbps", "median_ms"])
    df["device"] = dev.get("name", "")
    df["platform"] = dev.get("platform", "")
    return df




def _num(v: Any) -> float:
    return math.nan if v is None else float(v)


def _prov(doc: dict[str, Any], device_info: dict[str, Any], params: dict[str, Any]) -> dict:
    return {"config_hash": short_hash(params), "kernel_hash": doc.get("kernel_hash"),
            "runner_hash": None, "device_fingerprint": provenance.device_fingerprint(device_info),
            "git_rev": provenance.git_rev()}


def read_gemm(path: str | Path) -> pd.DataFrame:
    """Rows of the ``gemm`` table from one ``gemm/<device>/<version>.json``; a skipped
    version (CLBlast absent) gives one row with status ``skipped`` and the reason."""
    doc = read_json(path)
    with _shaped(path, "a GEMM sweep file"):
        return _gemm_rows(doc)


def _gemm_rows(doc: dict[str, Any]) -> pd.DataFrame:
    info = doc.get("device_info") or {}
    prov = _prov(doc, info, {"device": doc["device"], "version": doc["version"]})
    base = {"device": doc["device"], "kernel": doc["version"],
            "device_name": info.get("name"), "platform_name": info.get("platform")}
    if doc.get("status") == "skipped":
        row = {f.name: None for f in schema.schema("gemm")}
        row.update(base, status="skipped", status_reason=doc.get("reason"), **prov)
        return pd.DataFrame([row])
    rows = [{**base, "gemm": r["kernel"], "m": r["M"], "n": r["N"], "k": r["K"],
             "shape_source": r["source"], "status": r["status"],
             "status_reason": r.get("error"), "options": r.get("options"),
             "global_size": json.dumps(r.get("global")), "local_size": json.dumps(r.get("local")),
             "tuned_class": r.get("tuned_class"), "gflops": r.get("gflops"),
             "median_ms": r.get("median_ms"), "low_ms": r.get("low_ms"),
             "high_ms": r.get("high_ms"), "max_err": r.get("max_err"),
             "iterations": r.get("iterations"),
             "paired": json.dumps(r["paired"], sort_keys=True) if r.get("paired") else None,
             **prov} for r in doc["rows"]]
    return pd.DataFrame(rows)


def read_peaks(path: str | Path) -> pd.DataFrame:
    """Rows of the ``peaks`` table from one ``peaks/<device>.json``."""
    doc = read_json(path)
    with _shaped(path, "a peaks file"):
        return _peaks_rows(doc)


def _peaks_rows(doc: dict[str, Any]) -> pd.DataFrame:
    df = peaks_frame(doc)
    info = doc.get("device") or {}
    prov = _prov(doc, info, {"device": doc.get("device_id")})
    df = df.rename(columns={"name": "name", "device": "device_name",
                            "platform": "platform_name"})
    df.insert(0, "device", doc.get("device_id"))
    for k, v in prov.items():
        df[k] = v
    return df
