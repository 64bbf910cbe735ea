#!/usr/bin/env python3
"""The GEMM sweep's squares of one version on this host's PoCL, as the study's ``gemm`` job
measures them (phonetrain.stages.gemm.gemm, the default ``measure.gemm_*`` settings of
src/phonetrain/config/schema.py, the version's defaults untuned, no models' calls): prints
one line per round with the bench-gemm processes it started, its wall time and CPU time
(this process and its children, user + sys), and the squares' statuses. With ``--tune``
the version's tune job instead (phonetrain.stages.gemm.tune_version, the default
``measure.tune_*`` settings, the paper MLP's GEMM classes and the squares, this machine's
tuning records in an empty folder), with the configurations it chose.

Compare two commits by pointing PYTHONPATH at each one's ``src`` (the runner is compiled
from the ``src/runner`` beside the imported package)::

    git archive <old> src | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old/src python benchmarks/bench_gemm_squares.py --version tiled
    PYTHONPATH=src python benchmarks/bench_gemm_squares.py --version tiled
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from phonetrain import runner as rt
from phonetrain.config.schema import MeasureConfig
from phonetrain.devices import toolchains
from phonetrain.stages import gemm as gemm_stage
from phonetrain.stages.job import Job, Runtime, files
from phonetrain.stages.specs import shapes_hash


def _cpu_s() -> float:
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF,
                                                  resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def one_sweep(binary: Path, version: str, platform: str, work: Path,
              settings: dict | None = None) -> dict:
    """One gemm job of ``version`` in ``work`` -> {processes, wall_s, cpu_s, squares};
    ``settings``: MeasureConfig fields that replace the defaults."""
    m = MeasureConfig(**(settings or {}))
    dev = {"name": "host", "transport": "local", "opencl_library": None,
           "opencl_platform": platform, "opencl_device": ""}
    sf = work / "shapes.json"
    sf.write_text(json.dumps({"shapes": []}))
    p = {"device": "host", "device_config": dev, "stage_root": "stage", "version": version,
         "kernel_hash": "bench", "shapes_hash": shapes_hash([]), "sizes": list(m.gemm_sizes),
         "min_time_ms": m.gemm_min_time_ms, "max_launch_s": m.gemm_max_launch_s,
         "tune": False, "tune_min_time_ms": m.tune_min_time_ms,
         "tune_max_launch_s": m.tune_max_launch_s, "threads": 0,
         "plateau_gain": m.gemm_plateau_gain, "max_shape_s": m.gemm_max_shape_s}
    cpu0, t0 = _cpu_s(), time.monotonic()
    with _counted() as calls:
        doc = gemm_stage.gemm(Job(files({"runner": str(binary), "sources": [],
                                         "shapes": str(sf)}),
                                  files({"gemm": str(work / "results" / "gemm" / "host"
                                                     / f"{version}.json")}),
                                  p, work / "gemm.log", Runtime(600.0, False, str(work))))
    return {"processes": len(calls), "wall_s": time.monotonic() - t0,
            "cpu_s": _cpu_s() - cpu0,
            "squares": " ".join(f"{r['M']}:{r['gflops']:.1f}" if r["status"] == "ok" else
                                f"{r['M']}:{_why(r)}" for r in doc["rows"])}


@contextlib.contextmanager
def _counted():
    """Count the bench-gemm processes started inside the block: yields a list that gets each
    process's number of cases."""
    calls: list[int] = []
    real = rt.Runner.bench_gemm

    def counted(self, spec, out, *a, **kw):
        calls.append(len(spec["cases"]))
        return real(self, spec, out, *a, **kw)
    rt.Runner.bench_gemm = counted
    try:
        yield calls
    finally:
        rt.Runner.bench_gemm = real

def _why(row: dict) -> str:
    """A square's status, and for a skipped one the rule that skipped it."""
    err = row.get("error") or ""
    return "plateau" if "plateau" in err else "launch" if "launch" in err else row["status"]


MLP_CLASSES = ["gemm_nt_32x256x784", "gemm_tn_256x784x32", "gemm_nn_32x784x256",
               "gemm_nt_32x128x256", "gemm_tn_128x256x32", "gemm_nn_32x256x128",
               "gemm_nt_32x16x128", "gemm_tn_16x128x32", "gemm_nn_32x128x16"]
"""The paper MLP's (784-256-128-16, batch 32) GEMM calls as tuning classes."""


def one_tune(binary: Path, version: str, platform: str, work: Path) -> dict:
    """One tune job of ``version`` in ``work`` -> {processes, wall_s, cpu_s, squares}
    (``squares``: each class and the TSM x TSN (or defines) it chose)."""
    from phonetrain.stages.specs import TuneVersionSpec, classes_hash, to_params

    m = MeasureConfig()
    dev = {"name": "host", "transport": "local", "opencl_library": None,
           "opencl_platform": platform, "opencl_device": ""}
    spec = TuneVersionSpec(device="host", device_config=dev, stage_root="stage",
                           kernel=version, kernel_hash="bench",
                           classes_hash=classes_hash(MLP_CLASSES), sizes=list(m.gemm_sizes),
                           tune=True, tune_min_time_ms=m.tune_min_time_ms,
                           tune_max_launch_s=m.tune_max_launch_s,
                           tune_finalists=m.tune_finalists,
                           tune_screen_min_time_ms=m.tune_screen_min_time_ms)
    out = files({"tuning": [str(work / "tuning" / f"{c}.json") for c in MLP_CLASSES],
                 "squares": str(work / "tuning" / "squares.json")})
    os.environ["PHONETRAIN_TUNING_DIR"] = str(work / "records")
    cpu0, t0 = _cpu_s(), time.monotonic()
    with _counted() as calls:
        docs = gemm_stage.tune_version(Job(files({"runner": str(binary), "sources": []}), out,
                                           to_params(spec), work / "tune.log",
                                           Runtime(600.0, False, str(work))))
    chosen = []
    for cls, doc in sorted(docs.items()):
        for name, c in sorted((doc.get("classes") or {}).items()):
            d = c["defines"]
            chosen.append(f"{name}:" + ("x".join(str(d[k]) for k in ("TSM", "TSN", "TSK"))
                                        if "TSM" in d else ",".join(f"{k}{v}"
                                                                    for k, v in d.items())))
    return {"processes": len(calls), "wall_s": time.monotonic() - t0,
            "cpu_s": _cpu_s() - cpu0, "squares": " ".join(chosen)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default="tiled", help="kernel version (src/kernels/<name>)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--platform", default="Portable Computing Language")
    ap.add_argument("--sizes", help="square sizes, comma-separated (default: the study's)")
    ap.add_argument("--min-time-ms", type=float, help="measure.gemm_min_time_ms (ms)")
    ap.add_argument("--plateau-gain", type=float, help="measure.gemm_plateau_gain (0: off)")
    ap.add_argument("--tune", action="store_true", help="the version's tune job instead")
    a = ap.parse_args()
    settings = {k: v for k, v in (
        ("gemm_sizes", [int(x) for x in a.sizes.split(",")] if a.sizes else None),
        ("gemm_min_time_ms", a.min_time_ms), ("gemm_plateau_gain", a.plateau_gain))
        if v is not None}
    build = Path(tempfile.gettempdir()) / f"bench-gemm-squares-{os.getuid()}"
    binary = toolchains.build_runner(build)
    print(f"# {gemm_stage.__file__}; runner {binary}; load {os.getloadavg()[0]:.1f}")
    for k in range(a.rounds):
        with tempfile.TemporaryDirectory(prefix="bench-gemm-squares-") as tmp:
            r = one_tune(binary, a.version, a.platform, Path(tmp)) if a.tune else \
                one_sweep(binary, a.version, a.platform, Path(tmp), settings)
        print(f"{a.version} round {k}: {r['processes']} bench-gemm processes, "
              f"{r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} CPU s; {r['squares']} "
              f"(load {os.getloadavg()[0]:.1f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
