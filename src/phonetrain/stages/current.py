"""Whether each per-device result of a study is current: measured from the inputs the workflow
would use now, or left over from older ones.

Every per-device job (kernel build, GEMM sweep, peaks, bandwidth sweep) stamps its output
with :func:`stamp`: the hash of its params (the device config, the kernel version's source
hash, the study's settings: :mod:`phonetrain.stages.params`) and the SHA-256 of the runner
binary it ran. Snakemake reruns a job whose inputs changed; but when a workflow stops early (a
kernel edit that does not compile, Ctrl-C, an unplugged phone), the partial summary would
still read the older files. :func:`not_current` compares a file's stamp with the current
inputs, so the aggregate lists such a file as not current instead of as a measurement of
today's sources (runs get the same check from their ``params.json``,
:func:`phonetrain.results.runs.needs_remeasure`). A file without a stamp (written before
stamps existed) is not judged.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Mapping

from phonetrain import layout
from phonetrain.config import Sweep
from phonetrain.io import read_json, sha256_file, short_hash
from phonetrain.layout import Layout
from phonetrain.results.runs import needs_remeasure
from phonetrain.stages.job import Job
from phonetrain.stages.params import CPU_VERSION, expected_files, gemm_job, job_params

STAMP = "inputs"  # the key of the stamp in a per-device output document


def stamp(job: Job) -> dict[str, str]:
    """The stamp of a job's output: ``params_hash`` (:func:`phonetrain.io.short_hash` of its
    params) and ``runner_sha256`` (of its ``runner`` input)."""
    return {"params_hash": short_hash(job.params),
            "runner_sha256": sha256_file(job.input.runner)}


@functools.lru_cache(maxsize=64)
def _sha256(path: str, mtime_ns: int) -> str:
    return sha256_file(path)


def not_current(doc: Mapping[str, Any], params: Mapping[str, Any], runner: str | Path
                ) -> str | None:
    """Why the output document ``doc`` was not made from ``params`` and the runner binary at
    ``runner``, or None (also when ``doc`` has no stamp: it is not judged)."""
    st = doc.get(STAMP)
    if not isinstance(st, dict):
        return None
    changed = []
    if st.get("params_hash") != short_hash(dict(params)):
        changed.append("settings or kernel sources")
    r = Path(runner)
    if r.is_file() and st.get("runner_sha256") != _sha256(str(r), r.stat().st_mtime_ns):
        changed.append("runner binary")
    if not changed:
        return None
    return (f"not current: made with other {' and '.join(changed)} than the study's now "
            "(the workflow stopped before measuring it again); the next snakemake all does")


def product_params(jp: Mapping[str, Any], L: Layout) -> dict[str, tuple[dict, str]]:
    """Each per-device result file of a study -> (the params of the job that writes it, the
    runner binary it runs): kernel builds, GEMM sweeps (the study's versions and ``cpu``),
    peaks and bandwidth sweeps."""
    out: dict[str, tuple[dict, str]] = {}
    for (d, k), p in jp["kernel"].items():
        out[L.kernel_build(d, k)] = (p, L.runner(d))
        out[L.gemm(d, k)] = (gemm_job(jp, d, k), L.runner(d))
    for d, p in jp["device"].items():
        out[L.gemm(d, CPU_VERSION)] = (gemm_job(jp, d, CPU_VERSION), L.runner(d))
        out[L.peaks(d)] = (p, L.runner(d))
        out[L.bandwidth(d)] = (jp["bandwidth"][d], L.runner(d))
    return out


def stamped_doc(path: str | Path) -> dict[str, Any]:
    """The document holding a result file's stamp: the file itself (JSON), or for a
    bandwidth CSV its ``bench.json`` beside it; {} when there is none."""
    path = Path(path)
    doc_path = path.with_name("bench.json") if path.suffix == ".csv" else path
    return read_json(doc_path) if doc_path.is_file() else {}


def stale_products(jp: Mapping[str, Any], L: Layout, files: list[str]) -> dict[str, str]:
    """Of ``files`` (existing per-device result files of the study), those not made from the
    current inputs -> why (:func:`not_current`)."""
    params = product_params(jp, L)
    out = {}
    for f in files:
        if f in params and Path(f).exists():
            why = not_current(stamped_doc(f), *params[f])
            if why:
                out[f] = why
    return out


def not_ok_products(jp: Mapping[str, Any], L: Layout,
                    expected: Mapping[str, list[str]]) -> dict[str, str]:
    """The study's per-device files that are not current, successful results -> why: kernel
    builds that failed (``failed.json`` beside the would-be ``build.json``) or never ran, and
    any build, GEMM sweep, peaks or bandwidth file made from other inputs than the current
    ones (:func:`stale_products`)."""
    out: dict[str, str] = {}
    params = product_params(jp, L)
    for b in expected["builds"]:
        if Path(b).exists():
            continue
        failure = build_failure(b)
        if failure is None:
            out[b] = ("not built: its job did not run (a job it needs failed, or the workflow "
                      "was stopped); rerun snakemake")
            continue
        older = not_current(failure, *params[b]) if b in params else None
        out[b] = "\n".join(x for x in (
            failure.get("reason") or "build failed",
            f"(that failure is of older inputs; {older})" if older else "",
            failure.get("log") or "") if x)
    present = [f for kind in ("builds", "gemm", "peaks", "bandwidth") for f in expected[kind]
               if Path(f).exists()]
    out.update(stale_products(jp, L, present))
    return out


def build_failure(build_json: str | Path) -> dict | None:
    """The ``failed.json`` a failed kernel build left beside its would-be ``build_json``
    (``reason``, ``log``, the stamp), or None."""
    f = Path(build_json).with_name(layout.FAILED)
    return read_json(f) if f.exists() else None


def stale(sweep: Sweep) -> list[tuple[str, str]]:
    """What of the study ``sweep`` is not a current result, as (path, why) pairs: runs the
    next ``snakemake all`` re-measures (:func:`phonetrain.results.runs.needs_remeasure`) or
    that were never measured, per-device files that failed, never ran or are left from older
    inputs (:func:`not_ok_products`), and a summary or report without its COMPLETE marker.
    Jobs whose source files changed are Snakemake's to find (``snakemake -n all``)."""
    L = Layout(sweep.results_dir)
    jp = job_params(sweep)
    out = []
    for (d, e), p in jp["run"].items():
        rdir = L.run_dir(d, e)
        if not Path(rdir, layout.RUN).exists():
            failed = Path(rdir, layout.FAILED)
            why = read_json(failed).get("reason") if failed.exists() else None
            out.append((rdir, f"not measured{': ' + why if why else ''}"))
            continue
        why = needs_remeasure(rdir, p)
        if why:
            out.append((rdir, why))
    expected = expected_files(sweep)
    out += sorted((f, why.splitlines()[0]) for f, why in  # a compiler log stays in the log
                  not_ok_products(jp, L, expected).items())
    for kind in ("gemm", "peaks", "bandwidth"):
        out += [(f, "not measured") for f in expected[kind] if not Path(f).exists()]
    for marker, what in ((L.summary_complete(), "summary"), (L.report_complete(), "report")):
        if not Path(marker).exists():
            out.append((marker, f"absent: the {what} is partial or was never written"))
    return out
