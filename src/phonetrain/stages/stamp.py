"""The stamp a per-device job writes into its output: what it was made from.

Every per-device job (kernel build, GEMM sweep, peaks, bandwidth sweep) records
:func:`stamp`: the hash of its params (:mod:`phonetrain.stages.params`) and the SHA-256 of the
runner binary it ran. Snakemake decides what reruns; the stamp is provenance, and lets a
one-off ``phonetrain run`` reuse a workflow's kernel build made from the same inputs
(:func:`made_from`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from phonetrain.io import sha256_file, short_hash
from phonetrain.stages.job import Job

STAMP = "inputs"  # the key of the stamp in a per-device output document


def stamp(job: Job) -> dict[str, str]:
    """The stamp of a job's output: ``params_hash`` (:func:`phonetrain.io.short_hash` of its
    params) and ``runner_sha256`` (of its ``runner`` input)."""
    return {"params_hash": short_hash(job.params),
            "runner_sha256": sha256_file(job.input.runner)}


def made_from(doc: Mapping[str, Any], params: Mapping[str, Any], runner: str | Path) -> bool:
    """Whether the output document ``doc`` carries the stamp of ``params`` and the runner
    binary at ``runner`` (False when it has no stamp or the runner is absent)."""
    st = doc.get(STAMP)
    r = Path(runner)
    return (isinstance(st, dict) and r.is_file()
            and st.get("params_hash") == short_hash(dict(params))
            and st.get("runner_sha256") == sha256_file(r))
