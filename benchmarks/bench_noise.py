#!/usr/bin/env python3
"""The default study quiet, again quiet, under a CPU hog, and with a planted slowdown of one
kernel version; what each says and what `phonetrain compare` says between them.

Studies (each ``snakemake --cores N all --keep-going`` of the default study, or the study of the
overrides after ``--``), into ``<results>/<name>``:

- ``quiet``: the study alone on the host;
- ``quiet2``: the same sources again, alone (quiet-vs-quiet: what identical sources differ by);
- ``hog``: while one busy-loop process per core runs (bounded: killed when the study ends, or
  after ``--hog-s`` seconds);
- ``planted``: a copy of the workflow (``<results>/planted_ws``: Snakefile, rules, conf, src)
  whose ``--plant-version`` kernel version's GEMM loops (``gemm.cl``) each run an extra pass
  over the first ``--plant-share`` (0.3) of K, adding ~30% of the GEMM work to that version
  only (the extra sum enters C times 0.0f, which OpenCL C may not fold away without
  -cl-fast-relaxed-math); it starts from a copy of the quiet study's results, so Snakemake
  rebuilds and re-measures only that version's jobs (incremental rerun).

Prints markdown: per study the wall time, the load average at its start, the CPU time of the
main Snakemake process (its scheduler: CPU taken from the runs it schedules), the runs by status;
per study the usable runs, their intervals' widths and how far their runner processes
differ; per run the status, estimate ms [interval] and attempts in each study; per study and device
the "At a glance" verdict of each finding; and for quiet-vs-quiet, quiet-vs-hog and
quiet-vs-planted the count of `phonetrain compare` rows per verdict (runs and GEMM shapes).
Exits 1 when quiet-vs-quiet or quiet-vs-hog has a faster/slower row, or quiet-vs-planted reports
no planted-version row slower. ``--only`` picks studies; ``--reuse`` tabulates what exists::

    python benchmarks/bench_noise.py --cores 2
    python benchmarks/bench_noise.py --only quiet,planted -- 'sweep.models=[mlp_16_16]'
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from phonetrain.layout import Layout  # noqa: E402
from phonetrain.report import load_tables  # noqa: E402
from phonetrain.report.changes import compare  # noqa: E402
from phonetrain.report.glance import at_a_glance  # noqa: E402

HOG = "import time\nend = time.time() + {s}\nwhile time.time() < end:\n    pass\n"
STUDIES = ("quiet", "quiet2", "hog", "planted")
LOOP = re.compile(r"(?P<indent>[ \t]*)for \(int k = 0; k < K; \+\+k\)\n\s*acc \+= (?P<expr>[^;]+);")


def _cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (``/proc/<pid>/stat`` fields 14-15;
    proc(5)); None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def study(ws: Path, results: str, extra: list[str], cores: int) -> dict:
    """One ``snakemake all`` of the study in the workflow folder ``ws`` into ``results``:
    ``{"wall_s", "exit", "load_start", "snakemake_cpu_s"}``, the last the CPU time of the main
    Snakemake process itself (its scheduler; jobs run in child processes), read each second."""
    snakemake = Path(sys.executable).with_name("snakemake")
    cmd = [str(snakemake), "--cores", str(cores), "all", "--keep-going",
           "--config", f"overrides={json.dumps([f'results_dir={results}', *extra])}"]
    env = dict(os.environ, PYTHONPATH=str(ws / "src"))
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    with tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(cmd, cwd=ws, env=env, stdout=subprocess.DEVNULL, stderr=err,
                             text=True)
        cpu = 0.0
        while p.poll() is None:
            cpu = _cpu_s(p.pid) or cpu
            time.sleep(1)
        if p.returncode:
            err.seek(0)
            print(err.read()[-3000:], file=sys.stderr)
    return {"wall_s": time.monotonic() - t0, "exit": p.returncode, "load_start": load,
            "snakemake_cpu_s": cpu}


def hogs(seconds: float) -> list[subprocess.Popen]:
    """One busy loop per core, each ending by itself after ``seconds``."""
    return [subprocess.Popen([sys.executable, "-c", HOG.format(s=seconds)])
            for _ in range(os.cpu_count() or 1)]


def plant(ws: Path, version: str, share: float) -> int:
    """Add the extra pass to every GEMM loop of ``ws``'s ``src/kernels/<version>/gemm.cl``;
    returns how many loops were planted (0: the version's loops have another form)."""
    path = ws / "src" / "kernels" / version / "gemm.cl"
    num, den = round(share * 100), 100

    def extra(m: re.Match) -> str:
        i = m.group("indent")
        return (f"{m.group(0)}\n{i}{{   /* planted slowdown (benchmarks/bench_noise.py) */\n"
                f"{i}    float extra = 0.0f;\n"
                f"{i}    for (int k = 0; k < ({num} * K) / {den}; ++k)\n"
                f"{i}        extra += {m.group('expr')};\n"
                f"{i}    acc += 0.0f * extra;\n{i}}}")
    text, n = LOOP.subn(extra, path.read_text())
    path.write_text(text)
    return n


def planted_workspace(root: Path, quiet: Path, version: str, share: float) -> tuple[Path, int]:
    """A copy of the workflow with the planted version and the quiet study's results."""
    ws = root / "planted_ws"
    shutil.rmtree(ws, ignore_errors=True)
    ws.mkdir(parents=True)
    shutil.copy2(REPO / "Snakefile", ws / "Snakefile")
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    for d in ("rules", "conf", "src"):
        shutil.copytree(REPO / d, ws / d, ignore=ignore)
    if quiet.is_dir():
        shutil.copytree(quiet, ws / "results", symlinks=True,
                        ignore=shutil.ignore_patterns("quarantine", "stage"))
    return ws, plant(ws, version, share)


def _est(r) -> str:
    if r is None or r["iteration_ms"] != r["iteration_ms"]:
        return "-"
    return (f"{r['iteration_ms']:.3f} [{r['iteration_low_ms']:.3f}, "
            f"{r['iteration_high_ms']:.3f}]")


def _get(t, rid):
    return t.loc[rid] if t is not None and rid in t.index else None


def run_table(tables: dict[str, dict]) -> None:
    names = list(tables)
    runs = {n: t["runs"].set_index("run_id") for n, t in tables.items()}
    print("\n| run | " + " | ".join(f"{n}: status | estimate ms [interval] | attempts"
                                     for n in names) + " |")
    print("|---|" + "---|---|---|" * len(names))
    for rid in sorted(set().union(*(set(r.index) for r in runs.values()))):
        cells = []
        for n in names:
            r = _get(runs[n], rid)
            att = "-" if r is None or r["attempts"] != r["attempts"] else int(r["attempts"])
            cells += [r["status"] if r is not None else "-", _est(r), str(att)]
        print(f"| {rid} | " + " | ".join(cells) + " |")


def spread_table(tables: dict[str, dict]) -> None:
    """Per study: the verified runs, how many are usable (ok), how many have an estimate's
    interval within +-5% and +-10%, and how far the runs' runner processes differ (each
    process's own p25 of its measured iterations, ``iterations.parquet`` ``repeat``)."""
    print("\n| study | verified runs | ok | interval <= +-5% | <= +-10% | processes' p25 "
          "max/min: median [max] | runs whose processes differ > 10% |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for name, t in tables.items():
        runs = t["runs"][t["runs"]["status"].isin(["ok", "unstable"])]
        est = runs["iteration_ms"]
        half = ((runs["iteration_high_ms"] - est).combine(est - runs["iteration_low_ms"], max)
                / est)
        it = t["iterations"]
        own = (it[it["measured"] & it["run_id"].isin(runs["run_id"])]
               .groupby(["run_id", "repeat"])["wall_ms"].quantile(0.25))
        ratio = own.groupby(level=0).max() / own.groupby(level=0).min()
        n = max(len(runs), 1)
        print(f"| {name} | {len(runs)} | {(runs['status'] == 'ok').sum()} "
              f"({100 * (runs['status'] == 'ok').sum() / n:.0f}%) | "
              f"{(half <= 0.05).sum()} | {(half <= 0.10).sum()} | "
              f"{ratio.median():.2f} [{ratio.max():.2f}] | {(ratio > 1.1).sum()} |")


def glance_table(tables: dict[str, dict]) -> None:
    got = {n: at_a_glance(t) for n, t in tables.items()}
    names = list(got)
    print("\n| device | finding | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    keys = []
    for n in names:
        for dev, rows in got[n].items():
            keys += [(dev, r.finding) for r in rows if (dev, r.finding) not in keys]
    for dev, finding in keys:
        cells = []
        for n in names:
            row = next((r for r in got[n].get(dev, []) if r.finding == finding), None)
            cells.append(row.verdict if row else "-")
        print(f"| {dev} | {finding} | " + " | ".join(cells) + " |")


def compare_counts(a: dict, b: dict, version: str | None = None) -> Counter:
    """`phonetrain compare` verdicts per kind (runs, GEMM shapes), a "cannot tell" by the first
    word of its reason ("unstable", "settings", "intervals"); with ``version``, the rows of that
    kernel version counted apart (``<kind> <version>``)."""
    out: Counter = Counter()
    for c in compare(a, b):
        kind = c.kind if version is None or version not in c.subject else f"{c.kind} {version}"
        out[(kind, re.sub(r"^(cannot tell \(\w+)\b.*", r"\1 ...)", c.verdict))] += 1
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default="results/noise", help="folder for the studies")
    ap.add_argument("--cores", type=int, default=2, help="snakemake --cores")
    ap.add_argument("--hog-s", type=float, default=3600, help="longest the hog may run (s)")
    ap.add_argument("--only", default=",".join(STUDIES), help="studies to run, comma-separated")
    ap.add_argument("--plant-version", default="baseline", help="kernel version slowed down")
    ap.add_argument("--plant-share", type=float, default=0.3, help="extra share of K")
    ap.add_argument("--reuse", action="store_true", help="tabulate existing studies only")
    ap.add_argument("extra", nargs="*", help="Hydra overrides for every study")
    a = ap.parse_args()
    root = Path(a.results).resolve()
    only = [s for s in a.only.split(",") if s]
    folders = {n: root / n for n in STUDIES}
    folders["planted"] = root / "planted_ws" / "results"
    timing_file = root / "timing.json"
    timing = json.loads(timing_file.read_text()) if timing_file.is_file() else {}
    for name in [] if a.reuse else only:
        if name == "hog":
            procs = hogs(a.hog_s)
            try:
                timing[name] = study(REPO, str(folders[name]), a.extra, a.cores)
            finally:
                for p in procs:
                    p.kill()
                    p.wait()
        elif name == "planted":
            ws, n = planted_workspace(root, folders["quiet"], a.plant_version, a.plant_share)
            print(f"planted: {n} GEMM loops of {a.plant_version} do "
                  f"{100 * a.plant_share:.0f}% more multiply-adds", file=sys.stderr)
            timing[name] = study(ws, str(folders[name]), a.extra, a.cores)
        else:
            timing[name] = study(REPO, str(folders[name]), a.extra, a.cores)
        timing_file.parent.mkdir(parents=True, exist_ok=True)
        timing_file.write_text(json.dumps(timing, indent=1))
    tables = {}
    for name in only:
        summary = Path(Layout(str(folders[name])).summary_dir())
        if summary.is_dir():
            tables[name] = load_tables(str(summary))
    print(f"host: {os.cpu_count()} CPUs; load average now {os.getloadavg()[0]:.2f}")
    print("\n| study | wall s | snakemake exit | load at start | Snakemake main CPU s "
          "| runs by status |")
    print("|---|---:|---:|---:|---:|---|")
    nan = float("nan")
    for name, t in tables.items():
        tm = timing.get(name, {})
        st = ", ".join(f"{k} {v}" for k, v in sorted(Counter(t["runs"]["status"]).items()))
        print(f"| {name} | {tm.get('wall_s', nan):.0f} | {tm.get('exit', '-')} | "
              f"{tm.get('load_start', nan):.2f} | {tm.get('snakemake_cpu_s', nan):.1f} | {st} |")
    spread_table(tables)
    run_table(tables)
    glance_table(tables)
    bad = 0
    print("\n| comparison | kind | verdict | rows |")
    print("|---|---|---|---:|")
    for b, version in (("quiet2", None), ("hog", None), ("planted", a.plant_version)):
        if "quiet" not in tables or b not in tables:
            continue
        counts = compare_counts(tables["quiet"], tables[b], version)
        for (kind, v), n in sorted(counts.items()):
            print(f"| quiet vs {b} | {kind} | {v} | {n} |")
        if version is None:
            bad += sum(n for (_, v), n in counts.items() if v.startswith(("faster", "slower")))
        else:
            bad += not any(v.startswith("slower") and version in k for (k, v) in counts)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
