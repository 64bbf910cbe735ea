"""Run folders in the runner's output format for the aggregate and report tests.

Each folder is what the train/verify stages leave: params.json, run.json, trace.csv,
verify.json (or failed.json). Timings follow a fixed recipe so tests know the answers:
every command of a measured iteration lasts ``unit_ns`` (kernels ``kernel_ns``) and commands
run back to back after a 10 us launch gap each.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from phonetrain.lowering import LowerSpec, lower
from phonetrain.report.build import FIGURES
from phonetrain.results import stats
from phonetrain.results.schema import TABLES

GAP_NS = 10_000


def report_paths(folder: Path, fmt: str = "png") -> dict[str, Path]:
    """The report's ``outputs`` in ``folder``: html, md and figures/<name>.<fmt>."""
    folder = Path(folder)
    return {"html": folder / "report.html", "md": folder / "report.md",
            **{n: folder / "figures" / f"{n}.{fmt}" for n in FIGURES}}


def summary_paths(folder: Path) -> dict[str, Path]:
    """Every summary table's Parquet path in ``folder``: the ``outputs`` of aggregate()."""
    return {t: Path(folder) / f"{t}.parquet" for t in TABLES}


def write_run(root: Path, *, model="mlp_784_256_128_16", device="host", backend="cpu",
              placement="none", transfer="none", kernel="none", warmup=1, iterations=4,
              kernel_ns=100_000, unit_ns=50_000, n_kernels=3, max_abs_err=1e-6,
              status="ok", failed_reason=None, loss0=2.3) -> Path:
    """Write one run folder under ``root/<device>/<model>.<backend>.<kernel>`` and return it."""
    d = root / device / f"{model}.{backend}.{kernel}"
    d.mkdir(parents=True, exist_ok=True)
    params = {"run_id": d.name, "model": model, "device": device, "backend": backend,
              "placement": placement, "transfer": transfer, "kernel": kernel,
              "dataset": "digits", "batch_size": 32, "warmup": warmup,
              "iterations": iterations, "threads": 0, "verify_atol": 1e-3,
              "config_hash": f"cfg-{model}-{backend}-{kernel}",
              "kernel_hash": None if kernel == "none" else f"k-{kernel}",
              "git_rev": "abc123"}
    (d / "params.json").write_text(json.dumps(params))
    if failed_reason:
        (d / "failed.json").write_text(json.dumps({"reason": failed_reason}))
        return d
    opencl = backend != "cpu"
    steps = ([("h2d", "h2d", 4096)] if opencl else []) + \
        [("kernel", f"gemm_{i}", 0) for i in range(n_kernels)] + \
        ([("d2h", "d2h", 4)] if opencl else [])
    rows, iters, t = [], [], 1_000_000_000
    for it in range(warmup + iterations):
        t_begin = t
        for seq, (kind, name, nbytes) in enumerate(steps):
            dur = kernel_ns if kind == "kernel" else unit_ns
            t += GAP_NS
            dev = (lambda x: x - 5_000_000) if opencl else (lambda x: 0)
            rows.append({"iteration": it, "seq": seq, "kind": kind, "name": name,
                         "layer": "fc1", "phase": "forward" if kind == "kernel" else "transfer",
                         "bytes": nbytes or 1000, "flops": 2_000_000 if kind == "kernel" else 0,
                         "queued_ns": dev(t), "submit_ns": dev(t), "start_ns": dev(t),
                         "end_ns": dev(t + dur) if opencl else 0,
                         "host_begin_ns": t, "host_end_ns": t + dur})
            t += dur
        t += GAP_NS
        iters.append({"iteration": it, "warmup": it < warmup, "wall_ms": (t - t_begin) / 1e6,
                      "loss": loss0 - 0.1 * it})
    run = {"status": status, "warmup": warmup, "iterations": iterations, "iters": iters,
           "device": {"name": "pthread-cpu" if not opencl else "pocl-cpu",
                      "platform": "Portable Computing Language",
                      **({"api": "vulkan"} if backend.startswith("vulkan") else {})},
           "runner": {"version": "0.1", "source_hash": "runner-h"},
           "timer_resolution_ns": 1, "peak_rss_bytes": 10_000_000, "device_bytes_allocated": 0}
    pd.DataFrame(rows).to_csv(d / "trace.csv", index=False)
    (d / "run.json").write_text(json.dumps(run))
    (d / "verify.json").write_text(json.dumps({"max_abs_err": max_abs_err, "atol": 1e-3,
                                               "ok": max_abs_err <= 1e-3}))
    return d


def add_eval(run_dir: Path, acc0: float = 0.3, step: float = 0.08) -> Path:
    """Give a :func:`write_run` folder an ``eval.json``: one held-out evaluation per
    iteration, at its cumulative wall time, accuracy rising from ``acc0`` by ``step``."""
    iters = json.loads((run_dir / "run.json").read_text())["iters"]
    t, points = 0.0, []
    for i in iters:
        t += i["wall_ms"]
        k = i["iteration"]
        points.append({"iteration": k, "cumulative_wall_ms": t, "n_heldout": 200,
                       "heldout_loss": 2.3 - 0.2 * k, "heldout_accuracy": min(1.0, acc0 + step * k)})
    (run_dir / "eval.json").write_text(json.dumps({"points": points}))
    return run_dir


def add_power(run_dir: Path, power_w: float, throttled: bool = False) -> Path:
    """Give a :func:`write_run` folder the runner's ``power`` object: energy per iteration
    ``power_w`` x the mean measured iteration time (mJ), 2% standard error, 100 Hz."""
    doc = json.loads((run_dir / "run.json").read_text())
    walls = [i["wall_ms"] for i in doc["iters"] if not i["warmup"]]
    mj = power_w * sum(walls) / len(walls)
    doc["power"] = {"energy_per_iteration_mj": mj, "energy_uncertainty_mj": 0.02 * mj,
                    "sample_hz": 100.0, "gpu_mhz_start": 800.0,
                    "gpu_mhz_end": 500.0 if throttled else 800.0, "throttled": throttled}
    (run_dir / "run.json").write_text(json.dumps(doc))
    return run_dir


_PLANS: dict[tuple[str, str, int], str] = {}


def add_plan(run_dir: Path, model: str, kernel: str = "baseline", batch_size: int = 32) -> Path:
    """Give a :func:`write_run` folder the ``plan.json`` deploy leaves there: the real
    lowering of ``model`` at ``batch_size`` (CPU backend; the fused lowering for kernel
    ``fused``, else the per-layer one), so the aggregate reads its memory by role."""
    key = (model, "fused" if kernel == "fused" else "baseline", batch_size)
    if key not in _PLANS:
        plan = lower(LowerSpec(model=model, batch_size=batch_size, kernel=key[1]))
        _PLANS[key] = json.dumps(plan.to_json())
    (run_dir / "plan.json").write_text(_PLANS[key])
    return run_dir


def write_bandwidth(root: Path, device="host") -> Path:
    """A bandwidth CSV in the runner's columns with its params.json."""
    d = root / "bandwidth" / device
    d.mkdir(parents=True, exist_ok=True)
    rows = [{"op": k, "size_bytes": 4096 << i, "iterations": 100, "repeats": 3,
             "device_ns": 1e3, "host_ns": 2e3, "device_gbps": 2 * g * (1 + i) / 4,
             "host_gbps": g * (1 + i) / 4}
            for k, g in (("h2d", 2.0), ("d2h", 3.0), ("map", 8.0), ("unmap", 9.0), ("d2d", 20.0))
            for i in range(4)]
    pd.DataFrame(rows).to_csv(d / "bandwidth.csv", index=False)
    (d / "params.json").write_text(json.dumps({"device": device, "config_hash": "bw-h",
                                               "git_rev": "abc123"}))
    return d / "bandwidth.csv"


def write_bandwidth_sweep(root: Path, device="host", copy_gbps=8.0, d2d_gbps=400.0) -> Path:
    """A realistic bandwidth CSV, 4 KiB to 16 MiB: h2d/d2h copies at ``copy_gbps`` after
    10 us of call overhead, map/unmap zero-copy (7 us whatever the size), d2d at ``d2d_gbps``
    after 20 us (flat over the sweep: it ends inside the overhead)."""
    d = root / "bandwidth" / device
    d.mkdir(parents=True, exist_ok=True)
    rows = []
    for kind, over_ns, gbps in (("h2d", 10e3, copy_gbps), ("d2h", 10e3, copy_gbps),
                                ("map", 7e3, None), ("unmap", 7e3, None),
                                ("d2d", 20e3, d2d_gbps)):
        for i in range(0, 13, 2):
            size = 4096 << i
            dev_ns = size / gbps if gbps else 500.0
            host_ns = over_ns + (size / gbps if gbps else 0.0)
            rows.append({"op": kind, "size_bytes": size, "iterations": 50, "repeats": 3,
                         "device_ns": dev_ns, "host_ns": host_ns,
                         "device_gbps": size / dev_ns, "host_gbps": size / host_ns})
    pd.DataFrame(rows).to_csv(d / "bandwidth.csv", index=False)
    (d / "params.json").write_text(json.dumps({"device": device, "config_hash": "bw-h",
                                               "git_rev": "abc123"}))
    return d / "bandwidth.csv"


def write_build(root: Path, device="host", kernel="baseline", ok=True) -> Path:
    """A build.json for one kernel version on one device."""
    d = root / "build" / device / kernel
    d.mkdir(parents=True, exist_ok=True)
    doc = {"device": device, "kernel": kernel, "status": "ok" if ok else "failed",
           "programs": [{"program": "gemm", "build_ms": 12.5, "binary_size_bytes": 2048,
                         "log": "" if ok else "error: expected ';'",
                         "status": "ok" if ok else "failed"}]}
    (d / "build.json").write_text(json.dumps(doc))
    (d / "params.json").write_text(json.dumps({"device": device, "kernel": kernel,
                                               "config_hash": "b-h", "git_rev": "abc123"}))
    return d / "build.json"


def write_gemm(root: Path, device="host", version="tiled") -> Path:
    """A gemm/<device>/<version>.json as phonetrain.stages.gemm.gemm writes it."""
    d = root / "gemm" / device
    d.mkdir(parents=True, exist_ok=True)
    rows = [{"kernel": "gemm_nt", "M": 32, "N": 256, "K": 784, "global": [8, 8], "local": [8, 8],
             "status": "ok", "error": None, "gflops": 20.0, "median_ms": 0.64, "max_err": 1e-8,
             "iterations": 300, "source": "model:mlp_784_256_128_16", "options": "-DTS=8",
             "tuned_class": "medium"}]
    doc = {"device": device, "version": version, "status": "ok", "rows": rows,
           "kernel_hash": "k-h", "device_info": {"name": "pthread-cpu", "platform": "PoCL"}}
    (d / f"{version}.json").write_text(json.dumps(doc))
    return d / f"{version}.json"


def write_peaks(root: Path, device="host") -> Path:
    """A peaks/<device>.json as the runner's bench-peak writes it (plus device_id)."""
    d = root / "peaks"
    d.mkdir(parents=True, exist_ok=True)
    doc = {"mode": "bench-peak", "device_id": device, "device": {"name": "pthread-cpu",
                                                                 "platform": "PoCL"},
           "compute": [{"type": "float4", "width": 4, "work_items": 64, "median_ms": 1.0,
                        "gflops": 50.0}],
           "bandwidth": [{"kernel": "read_float4", "size_bytes": 1 << 20, "median_ms": 0.1,
                          "gbps": 10.5}]}
    (d / f"{device}.json").write_text(json.dumps(doc))
    return d / f"{device}.json"


def standard_study(root: Path) -> dict[str, object]:
    """cpu ok, opencl ok (slower, 80% movement-ish), opencl_staged wrong, lenet5 cpu failed."""
    runs = [
        write_run(root, backend="cpu"),
        write_run(root, backend="opencl", placement="resident", transfer="copy",
                  kernel="baseline", kernel_ns=400_000, unit_ns=600_000),
        write_run(root, backend="opencl_staged", placement="staged", transfer="copy",
                  kernel="baseline", kernel_ns=1_000, unit_ns=300_000, max_abs_err=0.5),
        write_run(root, model="lenet5", backend="cpu", failed_reason="runner exit 5: NaN loss"),
    ]
    return {"runs": runs, "bandwidth": [write_bandwidth(root)], "builds": [write_build(root)],
            "gemm": [write_gemm(root)], "peaks": [write_peaks(root)]}


def write_gemm_versions(root: Path, device: str, versions, shapes=((32, 256, 784),
                                                                    (64, 64, 64),
                                                                    (256, 256, 256))) -> list[Path]:
    """gemm/<device>/<version>.json for each version (plus ``cpu``), every shape measured,
    GFLOPS growing with the version's position so versions differ. A shape is ``(m, n, k)``
    of ``gemm_nn`` or ``(gemm, m, n, k)``."""
    d = root / "gemm" / device
    d.mkdir(parents=True, exist_ok=True)
    out = []
    shapes = [s if len(s) == 4 else ("gemm_nn", *s) for s in shapes]
    for i, version in enumerate([*versions, "cpu"]):
        rows = [{"kernel": gemm, "M": m, "N": n, "K": k, "global": [8, 8],
                 "local": [8, 8], "status": "ok", "error": None,
                 "gflops": (3.0 + 4 * i) * (1 + j), "median_ms": 1.0 / (1 + i + j),
                 "max_err": 1e-8, "iterations": 100,
                 "source": "model:mlp" if j == 0 else "square", "options": "",
                 "tuned_class": None} for j, (gemm, m, n, k) in enumerate(shapes)]
        doc = {"device": device, "version": version, "status": "ok", "rows": rows,
               "kernel_hash": f"k-{version}", "device_info": {"name": "dev", "platform": "P"}}
        (d / f"{version}.json").write_text(json.dumps(doc))
        out.append(d / f"{version}.json")
    return out


def multi_device_study(root: Path, devices, kernels=("baseline", "tiled"),
                       models=("mlp_784_256_128_16", "lenet5"),
                       measured_all: bool = False) -> dict[str, list[Path]]:
    """A study of hand-built folders over several devices: per device and model a CPU run
    and resident/copy, staged/copy and staged/map runs of every kernel version (timings
    varying with the device and version), a bandwidth sweep, the GEMM sweep of every version
    (plus the CPU backend) and peaks; one run of the first device failed verification and
    the last device's lenet5 CPU run is missing. ``measured_all``: every run also evaluated
    held-out accuracy and measured energy (:func:`add_eval`, :func:`add_power`; the CPU at
    2 W, OpenCL at 3 W, the first staged/map run throttled) and holds its plan
    (:func:`add_plan`)."""
    out: dict[str, list[Path]] = {"runs": [], "bandwidth": [], "gemm": [], "peaks": [],
                                  "builds": []}
    for di, dev in enumerate(devices):
        for model in models:
            last = dev == devices[-1] and model == "lenet5"
            out["runs"].append(write_run(root, device=dev, model=model, backend="cpu",
                                         kernel_ns=300_000 + 40_000 * di,
                                         failed_reason="adb: offline" if last else None))
            for ki, k in enumerate(kernels):
                for backend, pl, tr, u in (("opencl", "resident", "copy", 20_000),
                                           ("opencl_staged", "staged", "copy", 90_000),
                                           ("opencl_staged_map", "staged", "map", 60_000)):
                    out["runs"].append(write_run(
                        root, device=dev, model=model, backend=backend, placement=pl,
                        transfer=tr, kernel=k, kernel_ns=max(20_000, 200_000 - 30_000 * ki),
                        unit_ns=u + 5_000 * di,
                        max_abs_err=0.5 if (di, ki, backend) == (0, 0, "opencl_staged")
                        else 1e-6))
            if measured_all:
                for d in out["runs"][-1 - 3 * len(kernels):]:
                    if (d / "run.json").exists():
                        add_plan(d, model)
                        add_power(add_eval(d, acc0=0.3 + 0.01 * di), 2.0 if d.name.endswith(
                            ".cpu.none") else 3.0, throttled=d.name.endswith(
                            f"staged_map.{kernels[0]}"))
        out["bandwidth"].append(write_bandwidth_sweep(root, dev, copy_gbps=8.0 + 4 * di))
        out["gemm"] += write_gemm_versions(root, dev, kernels)
        out["peaks"].append(write_peaks(root, dev))
        out["builds"].append(write_build(root, dev))
    return out


def mark_unstable(run_dir: Path, reason: str, low_ms: float, high_ms: float,
                  other_cpu_share: float = 0.4, load_avg_1m: float = 3.5) -> None:
    """Give a :func:`write_run` folder the train stage's measurement verdict ``unstable``
    (``reason``), its estimate's interval widened to ``low_ms``..``high_ms``, measured while
    other processes used ``other_cpu_share`` of the CPU at load ``load_avg_1m``."""
    doc = json.loads((run_dir / "run.json").read_text())
    walls = [i["wall_ms"] for i in doc["iters"] if not i["warmup"]]
    m = stats.judge(walls, [{}], ci_target=0, max_other_cpu_share=1.0)
    m.update(unstable=True, reasons=[reason], low_ms=low_ms, high_ms=high_ms,
             other_cpu_share=other_cpu_share, load_avg_1m=load_avg_1m)
    (run_dir / "measurement.json").write_text(json.dumps(m))
