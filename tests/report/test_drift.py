"""Two studies of one host differ by more than either study's intervals (the host's other
tenants, its clocks, its caches). `phonetrain compare` and "Since the last study" gauge that
drift on the subjects nothing changed for and state a difference only beyond it. Every test
plants the drift it checks: identical sources drifting 0.6-1.0x say nothing; one kernel
version edited and planted 1.3x slower is reported slower; a changed run's build options
are named."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd

from helpers.results import summary_paths, write_gemm_versions, write_run
from phonetrain import layout, report
from phonetrain.report import changes, drift
from phonetrain.report import wording as w
from phonetrain.results import aggregate

SHAPES = tuple((32 * (1 + i), 64, 128 + 32 * i) for i in range(6))
RUNS = [dict(model=m, backend="opencl", placement="resident", transfer="copy", kernel=k)
        for m in ("mlp_784_256_128_16", "lenet5") for k in ("baseline", "tiled")] + \
       [dict(model=m, backend="cpu") for m in ("mlp_784_256_128_16", "lenet5")]


def _study(root: Path, name: str, time_scale, *, tiled_hash: str = "k-tiled",
           options: str = "-DTSM=64") -> dict[str, pd.DataFrame]:
    """One study: six GEMM shapes of three versions (+-2% intervals) and six runs, every
    figure's time multiplied by ``time_scale(subject_index)``; the tiled version built with
    ``options`` and its sources hashed ``tiled_hash``."""
    raw, out = root / name / "raw", root / name / "results"
    gemm = write_gemm_versions(raw, "host", ["baseline", "tiled"], shapes=SHAPES)
    for f in gemm:
        doc = json.loads(f.read_text())
        version = doc["version"]
        for j, r in enumerate(doc["rows"]):
            r["median_ms"] *= time_scale(version, j)
            r["gflops"] /= time_scale(version, j)
            r["low_ms"], r["high_ms"] = r["median_ms"] * 0.98, r["median_ms"] * 1.02
        doc["kernel_hash"] = tiled_hash if version == "tiled" else doc["kernel_hash"]
        f.write_text(json.dumps(doc))
    dirs = []
    for i, spec in enumerate(RUNS):
        kernel = spec.get("kernel", "none")
        d = write_run(raw, **spec, kernel_ns=int(100_000 * time_scale(kernel, 10 + i)),
                      unit_ns=int(50_000 * time_scale(kernel, 10 + i)))
        if kernel != "none":
            opts = options if kernel == "tiled" else ""
            (d / layout.PLAN).write_text(json.dumps({"programs": [
                {"name": "gemm", "source": f"{kernel}/gemm.cl", "options": opts}]}))
        if kernel == "tiled":
            p = d / "params.json"
            p.write_text(json.dumps({**json.loads(p.read_text()), "kernel_hash": tiled_hash}))
        dirs.append(d)
    aggregate.aggregate(dirs, summary_paths(out / "summary"), gemm_jsons=gemm,
                        ledger=out / "history" / "measurements.parquet")
    return report.load_tables(out / "summary")


def _drifting(low: float, high: float):
    """Every subject's time scaled by a different factor from ``low`` to ``high``."""
    return lambda version, j: low + (high - low) * ((7 * j + len(version)) % 13) / 12


def _stated(rows) -> list[str]:
    return [f"{r.label}: {r.verdict}" for r in rows if r.verdict.startswith(("faster", "slower"))]


def test_identical_sources_drifting_between_studies_are_never_a_change(tmp_path):
    """Every time 0.6-1.0x of the first study's, each interval +-2% (so the intervals of most
    subjects separate): nothing is faster or slower, each row says the host moved."""
    a = _study(tmp_path, "a", lambda v, j: 1.0)
    b = _study(tmp_path, "b", _drifting(0.6, 1.0))
    rows = changes.compare(a, b)
    assert len(rows) == 3 * 6 + 6
    # without the drift gauge the same intervals call most of them faster
    plain = [w.judge(changes.history_side(x), changes.history_side(y)).word
             for x, y in _history_pairs(a, b)]
    assert plain.count("faster") > 12
    assert _stated(rows) == []
    told = [r.verdict for r in rows if not r.identical]
    assert len(told) > 20 and all(v.startswith("cannot tell (") for v in told), told
    host = [v for v in told if v.startswith("cannot tell (nothing changed but the host: ")]
    assert len(host) == plain.count("faster"), told
    assert "unchanged GEMM shapes moved 0.6" in host[-1] and "GEMM shapes)" in host[-1]


def _history_pairs(a, b):
    ha, hb = (t["history"].set_index("subject") for t in (a, b))
    return [(ha.loc[s], hb.loc[s]) for s in ha.index.intersection(hb.index)]


def test_one_edited_version_planted_slower_beyond_the_drift_is_reported(tmp_path):
    """The host drifts 0.9-1.0x; the tiled version's sources change and its times grow 1.3x:
    its GEMM shapes and runs are slower, named by the changed sources; everything else says
    the host moved. An edit that moves its times 1.02x stays inside the drift."""
    a = _study(tmp_path, "a", lambda v, j: 1.0)
    drifting = _drifting(0.9, 1.0)
    b = _study(tmp_path, "b", lambda v, j: drifting(v, j) * (1.3 if v == "tiled" else 1.0),
               tiled_hash="k-tiled-2")
    rows = changes.compare(a, b)
    tiled = [r for r in rows if "tiled" in r.subject]
    assert len(tiled) == 6 + 2
    assert all(r.verdict == "slower" and r.changed == "kernel sources k-tiled -> k-tiled-2"
               for r in tiled), [(r.subject, r.verdict, r.changed) for r in tiled]
    assert not [s for s in _stated(rows) if "tiled" not in s]
    c = _study(tmp_path, "c", lambda v, j: drifting(v, j) * (1.02 if v == "tiled" else 1.0),
               tiled_hash="k-tiled-2")
    inside = [r.verdict for r in changes.compare(a, c) if "tiled" in r.subject]
    assert len(inside) == 8 and all(v.startswith("cannot tell (") for v in inside), inside
    assert any(v.startswith("cannot tell (within the host's drift: unchanged ") for v in inside)


def test_since_the_last_study_gauges_the_drift_too(tmp_path):
    """A re-measuring aggregation into the same ledger: the rerun's unchanged runs drift
    0.6-1.0x and stay unstated; the edited tiled version, 1.8x slower, is stated."""
    a = _study(tmp_path, "s", lambda v, j: 1.0)
    shutil.rmtree(tmp_path / "s" / "raw")
    drifting = _drifting(0.6, 1.0)
    b = _study(tmp_path, "s", lambda v, j: drifting(v, j) * (1.8 if v == "tiled" else 1.0),
               tiled_hash="k-tiled-2")
    assert len(a["history"]) < len(b["history"])
    n, rows = changes.since_last_study(b["history"])
    assert n == 2
    assert sorted(s.split(":")[0] for s in _stated(rows)) == sorted(
        r.label for r in rows if "tiled" in r.subject)
    assert all(r.verdict == "slower" for r in rows if "tiled" in r.subject)


def test_a_runs_build_options_are_recorded_and_a_changed_choice_named(tmp_path):
    a = _study(tmp_path, "a", lambda v, j: 1.0, options="-DTSM=16")
    b = _study(tmp_path, "b", lambda v, j: 1.3, options="-DTSM=128")
    runs = a["runs"].set_index("kernel")
    assert runs.loc["tiled", "options"].tolist() == ["-DTSM=16"] * 2
    assert runs.loc["baseline", "options"].isna().all()     # no build options at all
    assert a["runs"].query("backend == 'cpu'")["options"].isna().all()
    rows = [r for r in changes.compare(a, b) if r.subject.endswith(".tiled")
            and "gemm" not in r.subject]
    assert len(rows) == 2
    assert all(r.changed == "build options -DTSM=16 -> -DTSM=128" for r in rows), \
        [r.changed for r in rows]


def test_the_drift_band_comes_from_usable_controls_only():
    """An unstable, interval-less or noisy (wide-interval) control says nothing about the
    host."""
    ok = w.Side(1.0, 0.98, 1.02)
    fast = w.Side(0.5, 0.49, 0.51)
    bad = w.Side(3.0, 2.0, 4.0, status="unstable", reason="other processes used 40%")
    bare = w.Side(3.0, float("nan"), float("nan"))
    wide = w.Side(0.9, 0.47, 3.65)     # ok, but its interval spans 7.8x: its own noise
    bands = drift.bands([("g", "run", ok, fast), ("g", "run", ok, bad), ("g", "run", ok, bare),
                         ("g", "run", ok, wide), ("h", "run", ok, bad)])
    assert bands == {"g": drift.Drift(0.5, 0.5, 1, "run")}
    assert bands["g"].text() == "unchanged runs moved 0.5x-0.5x (1 run)"
    # the host ran 2x faster: a changed subject at 0.6x moved less than the host did
    less = w.Side(0.6, 0.59, 0.61)
    assert w.judge(ok, less).word == "faster"
    assert drift.judge(ok, less, unchanged=False, drift=bands["g"]).reason.startswith(
        "within the host's drift")
    faster = w.Side(0.3, 0.29, 0.31)
    assert drift.judge(ok, faster, unchanged=False, drift=bands["g"]).word == "faster"
    assert drift.judge(ok, faster, unchanged=True, drift=bands["g"]).word == w.CANNOT_TELL
