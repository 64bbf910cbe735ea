#!/usr/bin/env python3
"""Vulkan GEMM GFLOPS of the kernel versions' compute shaders (``gemm_nn``; ``baseline`` and
``tiled``) at square M = N = K sizes, through the runner's Vulkan backend. Prints a markdown
table: per size and version the best verified configuration's median GFLOPS and its spread.

Method. Each (size, version, configuration) is a one-GEMM plan run by ``runner run`` on the
Vulkan device (:mod:`phonetrain.kernels.vk_gemm`, the timer the Vulkan tune job uses): A and
B uniform in [-1, 1] (the plan's seeded ``uniform`` fill), C = A @ B (alpha 1, beta 0), every
tensor resident in device-local memory, ``--warmup`` untimed then ``--iterations`` timed
iterations of one dispatch each. A dispatch's time is its trace row's device interval (the
two timestamp queries around it, ``src/runner/exec_vk.c``), so submission and the wait for
the fence are left out (OpenCL's bench-gemm times whole launches on the host clock instead).
GFLOPS = 2 n^3 / that time; a configuration's figure is the median over the timed
iterations, its spread their minimum..maximum. C is then read back (the plan's dump) and
checked against float64 numpy on every row (n <= 256) or on 32 rows including the first and
last: max_err = max |C - ref| / K, "wrong" above 1e-5 (bench-gemm's bound,
``src/runner/bench_gemm.c``). A version's configurations are its defaults, then for ``tiled``
the specialization-constant candidates of ``src/kernels/tiled/vk/tuning.yaml``
(:func:`phonetrain.kernels.spirv.shader_candidates`; one SPIR-V, specialized per candidate,
launch geometry by the version's rule), or instead of those the ``--config`` ones (each
checked against that file's constraints); the table reports the fastest verified one.

Needs numpy, pandas, PyYAML, the runner built with the Vulkan headers (built here when
--runner is not given) and the versions' SPIR-V: compiled here with glslc, or read from
``--spirv DIR`` (``DIR/<version>/gemm_nn.spv``) on a machine without glslc. Write that folder
on a host that has glslc with ``--write-spirv DIR``::

    python benchmarks/bench_vk_gemm.py --sizes 64,128,256                 # lavapipe here
    python benchmarks/bench_vk_gemm.py --write-spirv /tmp/spv             # then, elsewhere:
    python benchmarks/bench_vk_gemm.py --spirv /tmp/spv --sizes 1024,2048,4096 \\
        --cublas-json cublas.json --json vk_gemm.json

``--cublas-json`` (``benchmarks/bench_cublas.py --json``) adds cuBLAS FP32's median beside
each size and the best version's share of it. ``--json FILE`` keeps every configuration's
result as it completes (``"finished": false`` until the end).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from phonetrain.io import write_json  # noqa: E402
from phonetrain.kernels import load_version, tuning  # noqa: E402
from phonetrain.kernels import vk_gemm  # noqa: E402
from phonetrain.kernels.gemm import GemmShape, gemm_spec  # noqa: E402
from phonetrain.kernels.spirv import (ShaderError, shader_candidate,  # noqa: E402
                                      shader_candidates, shader_hash, stage_spirv)
from phonetrain.layout import device_spirv  # noqa: E402
from phonetrain.runner import DeviceSelector, Runner, RunnerError, read_dump  # noqa: E402

KERNEL = "gemm_nn"
HASH_FILE = "shader_hash.txt"   # beside --write-spirv's SPIR-V: the sources it came from


@dataclass
class Result:
    """One configuration at one size: GFLOPS per timed iteration (device time), the check."""

    n: int
    version: str
    config: str                  # "TSM=64 TSN=64 ..." ("" for a version without constants)
    status: str                  # ok | wrong | error
    gflops: list[float]
    max_err: float | None = None
    error: str = ""
    device: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.gflops) if self.gflops else math.nan

    def to_json(self) -> dict[str, Any]:
        """The fields, the median and range of GFLOPS (null without times), max_err null
        where not finite."""
        g = self.gflops
        return asdict(self) | {
            "median_gflops": self.median if g else None, "min_gflops": min(g, default=None),
            "max_gflops": max(g, default=None),
            "max_err": self.max_err if self.max_err is not None and math.isfinite(self.max_err)
            else None}


def config_name(defines: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in defines.items())


def measure(runner: Runner, root: Path, version: str, defines: dict[str, Any], n: int,
            a: argparse.Namespace) -> Result:
    """One configuration at one size (module doc: method)."""
    cfg = config_name(defines)
    kv = tuning.candidate_version(load_version(version), {"defines": defines})
    try:
        spec = gemm_spec(kv, [GemmShape(KERNEL, n, n, n)], source=device_spirv(version),
                         backend="vulkan", repeats=a.iterations)
    except ValueError as e:
        return Result(n, version, cfg, "error", [], error=str(e))
    tag = f"{version}.{n}." + (cfg.replace("=", "").replace(" ", "_") or "defaults")
    plan = vk_gemm.gemm_plan(spec, f"gemm/{version}/{n}")
    plan.warmup, plan.iterations = a.warmup, a.iterations
    plan.save(root / "plans" / tag / "plan.json")
    out = root / "out" / tag
    try:
        run = runner.run(f"plans/{tag}/plan.json", out, profiling=True)
    except RunnerError as e:
        return Result(n, version, cfg, "error", [], error=str(e).splitlines()[0])
    case = vk_gemm.gemm_document(spec, run, out / "trace.csv",
                                 lambda t: read_dump(out, t))["cases"][0]
    ns = vk_gemm.device_ns(out / "trace.csv").get(0, [])
    shutil.rmtree(out, ignore_errors=True)   # 64 MiB of C at 4096
    gflops = [2.0 * n ** 3 / t for t in ns if t > 0]
    dev = (run.get("device") or {}).get("name", "")
    err = math.inf if case["max_err"] is None else case["max_err"]
    if case["status"] == "error":
        return Result(n, version, cfg, "error", gflops, err, case["error"], dev)
    return Result(n, version, cfg, case["status"], gflops, err, device=dev)


def best(results: list[Result]) -> Result | None:
    """The verified configuration with the highest median GFLOPS, else None."""
    ok = [r for r in results if r.status == "ok"]
    return max(ok, key=lambda r: r.median) if ok else None


def table_row(n: int, version: str, results: list[Result], cublas: float | None) -> str:
    """One markdown row: size, version, best verified configuration, its median GFLOPS, the
    iterations' min..max, max_err, candidates verified of tried, and its share of cuBLAS."""
    b = best(results)
    tried = f"{sum(r.status == 'ok' for r in results)}/{len(results)}"
    if b is None:
        why = "; ".join(sorted({f"{r.status}: {r.error or r.max_err}" for r in results}))[:80]
        return f"| {n} | {version} | none verified ({why}) | | | | {tried} | |"
    share = f"{b.median / cublas:.0%}" if cublas else ""
    return (f"| {n} | {version} | {b.config or 'defaults'} | {b.median:.1f} | "
            f"{min(b.gflops):.1f}-{max(b.gflops):.1f} | {b.max_err:.1e} | {tried} | {share} |")


TABLE_HEAD = ("| n (M=N=K) | version | best verified configuration | GFLOPS median | "
              "min-max | max_err | verified/tried | of cuBLAS FP32 |\n"
              "|---|---|---|---|---|---|---|---|")


def configurations(version: str, every: bool, configs: list[str]) -> list[dict[str, Any]]:
    """The version's defaults, then (``every``) its ``vk/tuning.yaml`` candidates, or instead
    ``configs`` (``"TSM=128 TSN=128 ..."`` each, over the defaults, checked against that
    file's constraints; only for a version with specialization constants)."""
    cands = [c["defines"] for c in shader_candidates(version)]
    if not every:
        return cands[:1]
    if not configs or not any(cands[0]):
        return cands
    return cands[:1] + [shader_candidate(version, {k: int(v) for k, v in
                                                   (kv.split("=") for kv in c.split())})
                        for c in configs]


def stage(versions: list[str], root: Path, spirv: str | None) -> None:
    """Each version's ``gemm_nn`` SPIR-V into ``root/spirv/<version>/``: copied from
    ``spirv/<version>/`` (a warning on stderr where its recorded shader hash is not this
    tree's), else compiled with glslc."""
    for v in versions:
        if not spirv:
            stage_spirv(v, root, kernels={KERNEL})
            continue
        src = Path(spirv) / v
        if not (src / f"{KERNEL}.spv").is_file():
            sys.exit(f"{src / (KERNEL + '.spv')} is missing: compile it where glslc is "
                     f"(python benchmarks/bench_vk_gemm.py --write-spirv {spirv})")
        stamp = src / HASH_FILE
        if stamp.is_file() and stamp.read_text().strip() != shader_hash(v):
            print(f"warning: {src} was compiled from other {v} shaders than this tree's",
                  file=sys.stderr)
        dest = root / device_spirv(v)
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / f"{KERNEL}.spv", dest / f"{KERNEL}.spv")


def write_spirv(versions: list[str], dest: str) -> None:
    """Compile each version's shaders into ``dest/<version>/`` with their shader hash."""
    with tempfile.TemporaryDirectory(prefix="vk-gemm-spv-") as tmp:
        for v in versions:
            out = stage_spirv(v, Path(tmp))
            target = Path(dest) / v
            target.mkdir(parents=True, exist_ok=True)
            for f in out.glob("*.spv"):
                shutil.copy2(f, target / f.name)
            (target / HASH_FILE).write_text(shader_hash(v) + "\n")
            print(f"{target}: {len(list(out.glob('*.spv')))} SPIR-V files", file=sys.stderr)


def read_cublas(path: str | None) -> dict[int, float]:
    """``{n: median GFLOPS}`` of ``bench_cublas.py --json``; empty without a file."""
    if not path or not Path(path).is_file():
        return {}
    return {int(r["n"]): float(r["median_gflops"]) for r in json.loads(Path(path).read_text())
            .get("rows", [])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runner", help="runner binary (default: build one with --cc)")
    ap.add_argument("--cc", default="cc")
    ap.add_argument("--vk-device", help="Vulkan device name substring (default: the first GPU)")
    ap.add_argument("--vk-lib", help="libvulkan path (default: the system loader)")
    ap.add_argument("--versions", default="baseline,tiled")
    ap.add_argument("--sizes", default="1024,2048,4096", help="square M=N=K sizes")
    ap.add_argument("--defaults-only", action="store_true", help="no tuning candidates")
    ap.add_argument("--config", action="append", default=[], metavar='"TSM=128 TSN=128 ..."',
                    help="a configuration of the specialization constants to time (over the "
                    "defaults; repeatable) instead of tuning.yaml's candidates")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--max-launch-s", type=float, default=5.0, help="skip a version at a size "
                    "where its last size's GFLOPS predict a longer dispatch")
    ap.add_argument("--spirv", help="folder of compiled SPIR-V (<version>/gemm_nn.spv)")
    ap.add_argument("--write-spirv", metavar="DIR", help="compile the versions' shaders into "
                    "DIR/<version>/ and exit")
    ap.add_argument("--cublas-json", help="bench_cublas.py --json output to set beside")
    ap.add_argument("--json", help="keep every configuration's result here as it completes")
    ap.add_argument("--per-candidate", action="store_true",
                    help="also print every configuration's result (stderr)")
    a = ap.parse_args()
    versions = [v for v in a.versions.split(",") if v]
    try:   # a --config that is no configuration stops here, before any build
        for v in versions:
            configurations(v, not a.defaults_only, a.config)
    except (ShaderError, ValueError) as e:
        sys.exit(f"--config: {e}")
    if a.write_spirv:
        write_spirv(versions, a.write_spirv)
        return 0
    from phonetrain.devices.toolchains import build_runner
    binary = Path(a.runner) if a.runner else build_runner(
        Path(tempfile.mkdtemp(prefix="vk-gemm-runner-")), cc=a.cc)
    root = Path(tempfile.mkdtemp(prefix="vk-gemm-"))
    stage(versions, root, a.spirv)
    runner = Runner.local_binary(binary, root, DeviceSelector(vk_device=a.vk_device,
                                                              vk_lib=a.vk_lib), timeout_s=300)
    cublas = read_cublas(a.cublas_json)
    doc: dict[str, Any] = {"argv": sys.argv[1:], "finished": False, "results": []}
    print(TABLE_HEAD, flush=True)
    last: dict[str, float] = {}   # version -> best median GFLOPS at the previous size
    for n in (int(s) for s in a.sizes.split(",") if s):
        for v in versions:
            if last.get(v) and 2.0 * n ** 3 / (last[v] * 1e9) > a.max_launch_s:
                print(f"| {n} | {v} | skipped (~{2.0 * n ** 3 / (last[v] * 1e9):.0f} s per "
                      "dispatch) | | | | | |", flush=True)
                continue
            results = []
            for defines in configurations(v, not a.defaults_only, a.config):
                r = measure(runner, root, v, defines, n, a)
                results.append(r)
                doc["results"].append(r.to_json())
                if r.device:
                    doc["device"] = r.device
                if a.json:
                    write_json(doc, a.json)
                if a.per_candidate:
                    print(f"  {n} {v} {r.config}: {r.status} {r.median:.1f} GFLOPS "
                          f"max_err {r.max_err} {r.error}", file=sys.stderr, flush=True)
            b = best(results)
            if b:
                last[v] = b.median
            print(table_row(n, v, results, cublas.get(n)), flush=True)
    doc["finished"] = True
    if a.json:
        write_json(doc, a.json)
    print(f"\ndevice: {doc.get('device', '?')}; {a.iterations} timed dispatches after "
          f"{a.warmup}, device timestamps; cuBLAS: {a.cublas_json or 'not given'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
