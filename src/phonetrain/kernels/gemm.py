"""GEMM and peak microbenchmarks through the runner's ``bench-gemm`` and ``bench-peak`` modes.

:func:`gemm_spec` turns a kernel version and a list of :class:`GemmShape` into the runner's
bench-gemm spec (launch geometry from :func:`phonetrain.kernels.launch.geometry`, so tuned
defines and local sizes apply exactly as in training plans); :func:`run_runner` executes a mode on
this host; :func:`gemm_frame` / :func:`peaks_frame` turn the runner's JSON into DataFrames.
:func:`bench_gemm` and :func:`peaks` chain these for the local device. The method (checked
launch, warm-up, calibration to ``min_time_ms``, median of repeats, host clock around whole
calls) is documented in ``src/runner/bench_gemm.c``.

Only numpy/pandas and PyYAML are needed (no Hydra), so ``benchmarks/bench_gemm.py`` runs on bare
hosts.
"""

from __future__ import annotations

import json
import math
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from .abi import GEMM_KERNELS
from .launch import IMAGE_MAX_WIDTH4, geometry
from .versions import KERNELS_ROOT, KernelVersion


class BenchError(RuntimeError):
    """The runner failed a benchmark; the message has its exit status and stderr tail."""


@dataclass(frozen=True)
class GemmShape:
    """One GEMM call: ``kernel`` in :data:`GEMM_KERNELS`, C is ``M x N``, inner size ``K``."""

    kernel: str
    M: int
    N: int
    K: int

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K


def square_shapes(sizes: Iterable[int], kernels: Iterable[str] = ("gemm_nn",)) -> list[GemmShape]:
    """``M = N = K = n`` shapes for each size and kernel."""
    return [GemmShape(k, n, n, n) for n in sizes for k in kernels]


def plan_shapes(plan) -> list[GemmShape]:
    """The distinct GEMM calls of a lowered :class:`~phonetrain.plan.Plan`, in plan order."""
    out: list[GemmShape] = []
    for s in plan.steps:
        if s.op == "kernel" and s.name in GEMM_KERNELS:
            m, n, k = (int(a["i"]) for a in s.args[:3])
            g = GemmShape(s.name, m, n, k)
            if g not in out:
                out.append(g)
    return out


def gemm_spec(version: KernelVersion | None, shapes: list[GemmShape], *, source: str = "",
              backend: str = "opencl", min_time_ms: float = 100, repeats: int = 5,
              threads: int = 0, seed: int = 1) -> dict[str, Any]:
    """The runner's bench-gemm spec (JSON layout: ``src/runner/bench_gemm.c``).

    ``version`` None with ``backend="cpu"`` benchmarks the runner's CPU GEMM; a version with a
    ``gemm_library`` routes to that library (the spec's ``source`` is the library's reserved
    name, no build options); otherwise ``source`` is the path of the version's ``gemm.cl`` as
    the runner will see it. A version whose ``image_operand`` is B reads B through an
    image2d_t (``b_image_width4``: the view's maximum width, pixels). Raises ``ValueError``
    when the version's defines do not fit its geometry rule or its image operand is not B.
    """
    if backend == "cpu" or version is None:
        return {"backend": "cpu", "threads": threads, "source": "", "options": "",
                "min_time_ms": min_time_ms, "repeats": repeats, "seed": seed,
                "cases": [{"kernel": g.kernel, "M": g.M, "N": g.N, "K": g.K} for g in shapes]}
    library = version.gemm_library
    image = version.image_operand is not None
    if image and version.image_operand != "B":
        raise ValueError(f"kernel version {version.name}: image_operand "
                         f"{version.image_operand}: bench-gemm binds only operand B as an image")
    cases = []
    for g in shapes:
        glob, local = geometry(g.kernel, {"M": g.M, "N": g.N, "K": g.K}, version)
        cases.append({"kernel": g.kernel, "M": g.M, "N": g.N, "K": g.K, "global": glob,
                      "local": local})
    return {"backend": "opencl", "source": library or source,
            "options": "" if library else version.options, "min_time_ms": min_time_ms,
            "repeats": repeats, "seed": seed, "cases": cases,
            **({"b_image_width4": IMAGE_MAX_WIDTH4} if image else {})}


def run_runner(runner: str | Path, mode: str, args: list[str], *, cwd: str | Path | None = None,
               timeout_s: float = 600) -> subprocess.CompletedProcess:
    """Run ``runner <mode> args...`` on this host; :class:`BenchError` on a non-zero exit."""
    argv = [str(runner), mode, *args]
    try:
        res = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        raise BenchError(f"{' '.join(argv)}: timed out after {timeout_s} s") from e
    if res.returncode != 0:
        tail = "\n".join(res.stderr.strip().splitlines()[-30:])
        raise BenchError(f"runner {mode} exited with status {res.returncode}:\n{tail}")
    return res


def gemm_frame(doc: dict[str, Any], version: str) -> pd.DataFrame:
    """One row per case of a bench-gemm ``gemm.json``: version, kernel, M, N, K, global,
    local, options, status (ok | wrong | error | skipped), gflops, median_ms, max_err,
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
            "median_ms": _num(c.get("median_ms")), "max_err": _num(c.get("max_err")),
            "iterations": int(c.get("iterations") or 0),
            "device": dev.get("name", "host CPU (runner cpu backend)"),
            "platform": dev.get("platform", "")})
    df = pd.DataFrame(rows, columns=["version", "kernel", "M", "N", "K", "global", "local",
                                     "options", "status", "error", "gflops", "median_ms",
                                     "max_err", "iterations", "device", "platform"])
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


def bench_gemm(runner: str | Path, version: KernelVersion | None, shapes: list[GemmShape], *,
               backend: str = "opencl", selectors: list[str] | None = None,
               min_time_ms: float = 100, repeats: int = 5, threads: int = 0,
               kernels_root: Path = KERNELS_ROOT, timeout_s: float = 600) -> pd.DataFrame:
    """GFLOPS of ``version``'s GEMM kernels (or the CPU backend: ``version=None`` or
    ``backend="cpu"``) on this host for ``shapes``; see :func:`gemm_frame` for the columns.
    The version's ``gemm.cl`` is the nearest one along its inheritance chain. Raises
    :class:`BenchError` when the runner fails (e.g. a kernel that does not compile)."""
    source = ""
    if version is not None and backend == "opencl" and version.gemm_library is None:
        source = str(_gemm_source(version, Path(kernels_root)))
    spec = gemm_spec(version, shapes, source=source, backend=backend, min_time_ms=min_time_ms,
                     repeats=repeats, threads=threads)
    with tempfile.TemporaryDirectory(prefix="phonetrain-gemm-") as tmp:
        (Path(tmp) / "spec.json").write_text(json.dumps(spec))
        run_runner(runner, "bench-gemm", ["--spec", "spec.json", "--out", "out",
                                          *(selectors or [])], cwd=tmp, timeout_s=timeout_s)
        doc = json.loads((Path(tmp) / "out" / "gemm.json").read_text())
    return gemm_frame(doc, "cpu" if spec["backend"] == "cpu" else version.name)


def _gemm_source(version: KernelVersion, kernels_root: Path) -> Path:
    for v in version.chain:
        p = kernels_root / v / "gemm.cl"
        if p.exists():
            return p
    raise BenchError(f"kernel version {version.name}: no gemm.cl in {version.chain}")


def peaks(runner: str | Path, selectors: list[str] | None = None, *, min_time_ms: float = 50,
          work_items: int = 0, timeout_s: float = 600) -> pd.DataFrame:
    """Peak compute (GFLOPS per vector width) and read bandwidth (GB/s) of this host's OpenCL
    device: the roofline's two ceilings. ``work_items`` > 0 shrinks the compute launches
    (tests); 0 = compute units x max work-group x 16. Columns: :func:`peaks_frame`."""
    extra = ["--work-items", str(work_items)] if work_items else []
    with tempfile.TemporaryDirectory(prefix="phonetrain-peak-") as tmp:
        run_runner(runner, "bench-peak", ["--out", "out", "--min-time-ms", str(min_time_ms),
                                          *extra, *(selectors or [])], cwd=tmp,
                   timeout_s=timeout_s)
        return peaks_frame(json.loads((Path(tmp) / "out" / "peaks.json").read_text()))
