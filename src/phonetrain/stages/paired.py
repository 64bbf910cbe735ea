"""What a run ran, and the side-by-side measurement of a changed kernel build.

Every measured OpenCL or Vulkan run keeps what it ran (:func:`keep_ran`) in ``ran/`` of its
run folder: ``plan.json`` (the device's plan: its programs' build options with the tuning
choice, the launch sizes), for OpenCL ``kernels/<file>.cl`` (the sources the device compiled,
after inheritance and with ``common.cl`` in front), for Vulkan ``spirv/<kernel>.spv`` (the
plan's shaders compiled as the deploy compiles them: glslc is deterministic, so the same
bytes), and ``ran.json`` (the kernel version and its hash, the runner's sha256, the tuned
class, the build key: :func:`phonetrain.kernels.build_key.build_key` of the OpenCL sources,
:func:`~phonetrain.kernels.build_key.spirv_key` of the SPIR-V). Small files; the quarantine
moves them with the run folder.

When a rerun re-measures a run whose kernel build changed (another kernel hash, or another
plan: tuning), :func:`previous_run` finds the run it replaces (the run folder itself, or the
newest copy of it in ``quarantine/``), and:

- the same build after compilation (equal build keys, plans and runner): nothing is
  measured; the previous measurement is the new one's, with ``paired.json`` saying ``no
  change (identical build)`` (:func:`copy_previous`);
- else the previous build is pushed beside the new one (``kernels/<version>.previous/``, or
  ``spirv/<version>.previous/`` for Vulkan; ``plans/<experiment>/plan.previous.json``) and
  :func:`pairs_until_decisive` measures pairs, each pair ONE runner process holding both
  plans (``runner run --previous-plan``, ``src/runner/run.c``): both set up on the same
  device, their measured iterations alternating, the order reversed every round (ABBA...),
  so that what the host does during the pair falls on both sides; each side adapts its own
  count and writes its own folder. A first look after ``measure.repeats`` pairs (at least
  2), then one more pair while the verdict is ``cannot tell``, at most
  :data:`RUN_MAX_PAIRS` pairs and :data:`RUN_BUDGET_S` seconds; the verdict
  (:func:`phonetrain.results.paired.until_decisive`) goes to ``paired.json``, the previous
  build's folders to ``previous/``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from phonetrain import layout
from phonetrain.errors import ResultsFileError
from phonetrain.io import read_json, sha256_file, write_bytes, write_json, write_text
from phonetrain.kernels import stage_kernels
from phonetrain.kernels.build_key import build_key, spirv_key
from phonetrain.kernels.spirv import stage_spirv
from phonetrain.plan import Plan
from phonetrain.results.paired import until_decisive

RAN, PAIRED, PREVIOUS = layout.RAN, layout.PAIRED, layout.PREVIOUS
RAN_JSON = "ran.json"
RAN_SPIRV = "spirv"          # ran/spirv/<kernel>.spv: a Vulkan run's SPIR-V
PREVIOUS_SUFFIX = ".previous"
PREVIOUS_PLAN = "plan.previous.json"
RUN_MAX_PAIRS, RUN_BUDGET_S = 12, 120.0
"""The most pairs (runner processes measuring both sides) of one run's side-by-side rerun, and
its time budget (s): 12 pairs are the 2 x 6 measurements of ``measure.repeats`` 2 x
``measure.max_attempts`` 3 (the most a run measured alone takes, by default) on each side."""
# not taken from the previous run: the deploy's plan.json is the new (equal) one already
NOT_COPIED = (layout.FAILED, layout.PERFETTO, layout.PLAN, PAIRED, RAN, PREVIOUS)


def ran_record(plan_json: Path, kernel: str, kernel_hash: str | None,
               runner_sha256: str | None, tuned_class: str | None, dest: Path) -> dict:
    """Write ``dest`` (a ``ran/`` folder): the plan, the version's staged sources (a Vulkan
    plan: its shaders' SPIR-V, ``"spirv": true``) and ``ran.json``; returns ``ran.json``'s
    document. A shader that no longer compiles raises
    :class:`~phonetrain.kernels.spirv.ShaderError` (the deploy compiled it moments before)."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(plan_json, dest / layout.PLAN)
    plan = Plan.load(plan_json)
    progs = plan.programs
    options = [f"{Path(p.source).name}:{p.options}" for p in progs]
    doc = {"kernel": kernel, "kernel_hash": kernel_hash, "runner_sha256": runner_sha256,
           "tuned_class": tuned_class, "options": [p.options for p in progs]}
    with tempfile.TemporaryDirectory(prefix="phonetrain-ran-") as tmp:
        if plan.backend == "vulkan":
            out = stage_spirv(kernel, Path(tmp), kernels={p.name for p in progs})
            mods = {f.name: f.read_bytes() for f in sorted(out.glob("*.spv"))}
            for name, data in mods.items():
                write_bytes(dest / RAN_SPIRV / name, data)
            doc |= {"sources": sorted(mods), "spirv": True, "build_key": spirv_key(mods, options)}
        else:
            src = stage_kernels(kernel, Path(tmp))
            texts = {f.name: f.read_text() for f in sorted(src.glob("*.cl"))}
            for name, text in texts.items():
                write_text(dest / "kernels" / name, text)
            doc |= {"sources": sorted(texts), "build_key": build_key(texts, options)}
    write_json(doc, dest / RAN_JSON)
    return doc


def keep_ran(into: Path, s: Any, plan_json: str | Path, manifest: dict[str, Any]) -> dict | None:
    """:func:`ran_record` of run ``s`` (a RunSpec) into ``into/ran``; None for a CPU run."""
    if not s.kernel:
        return None
    st = manifest.get("inputs") or {}
    return ran_record(Path(plan_json), s.kernel, s.kernel_hash, st.get("runner_sha256"),
                      manifest.get("tuned_class"), into / RAN)


def _measured(d: Path) -> bool:
    """A run folder holding a verified measurement and its record of what it ran."""
    try:
        run, ver = read_json(d / layout.RUN), read_json(d / layout.VERIFY)
    except ResultsFileError:   # missing or damaged: not a previous measurement to pair with
        return False
    return ((d / RAN / RAN_JSON).is_file() and (d / layout.MEASUREMENT).is_file()
            and run.get("status") not in ("skipped", "oom") and bool(ver.get("ok")))


def previous_run(rdir: Path, results_root: Path) -> Path | None:
    """The measured run a rerun of ``rdir`` replaces: ``rdir`` itself when it holds one, else
    the newest ``quarantine/<time>/<rdir's path>`` that does; None when there is none."""
    if _measured(rdir):
        return rdir
    rel = rdir.resolve().relative_to(results_root.resolve())
    q = results_root / "quarantine"
    stamps = sorted((p.name for p in q.iterdir() if p.is_dir()), reverse=True) \
        if q.is_dir() else []
    return next((q / t / rel for t in stamps if _measured(q / t / rel)), None)


def _plan_doc(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def pairing(prev: Path | None, p: dict[str, Any], new_ran: dict | None,
            new_plan: Path) -> tuple[str | None, str]:
    """How a rerun of params ``p`` relates to the previous run ``prev``: ``("identical",
    why)``, ``("paired", why)`` or ``(None, why)`` (measured alone, as a plain re-measure)."""
    if prev is None or new_ran is None:
        return None, "no previous measurement of this run keeps what it ran"
    old_p = read_json(prev / layout.PARAMS)
    rest = [k for k in set(old_p) | set(p) if k != "kernel_hash" and old_p.get(k) != p.get(k)]
    if rest:
        return None, f"the previous run had other settings ({', '.join(sorted(rest))})"
    old = read_json(prev / RAN / RAN_JSON)
    old_plan, plan = _plan_doc(prev / RAN / layout.PLAN), _plan_doc(new_plan)
    if old.get("kernel_hash") == new_ran["kernel_hash"] and old_plan == plan:
        return None, "same kernel build and plan: a re-measure"
    if bool(old.get("spirv")) != bool(new_ran.get("spirv")):
        return None, "the previous run kept no SPIR-V of what it ran" if new_ran.get("spirv") \
            else "the previous run kept SPIR-V, this one OpenCL sources"
    if old["build_key"] == new_ran["build_key"] and old_plan == plan and \
            old.get("runner_sha256") == new_ran["runner_sha256"]:
        return "identical", ("the shaders compile to the same SPIR-V" if new_ran.get("spirv")
                             else "the kernel sources differ only in comments and white space")
    if old_plan.get("tensors") != plan.get("tensors"):
        return None, "the previous plan's tensors differ: not comparable side by side"
    return "paired", "kernel build changed"


def copy_previous(prev: Path, tmp: Path) -> None:
    """The previous measurement as this run's (an identical build): its files into
    ``tmp/main``, its repeats and events process into ``tmp`` (the layout ``_install``
    takes), leaving out its failure record, trace export, plan (the deploy's, equal), pairing
    and record of what ran."""
    main = tmp / "main"
    main.mkdir(parents=True, exist_ok=True)
    for f in prev.iterdir():
        if f.name in NOT_COPIED or f.name.startswith("."):
            continue
        top = f.name.startswith("repeat_") or f.name == layout.EVENTS
        dest = (tmp if top else main) / f.name
        (shutil.copytree if f.is_dir() else shutil.copy2)(f, dest)


def push_previous(r: Any, prev: Path, exp: str, kernel: str, into: Path) -> tuple[str, Path]:
    """Put the previous build on the device beside the new one: its sources in
    ``kernels/<version>.previous/`` (a Vulkan run's SPIR-V in ``spirv/<version>.previous/``),
    its plan (programs pointed there) as ``plans/<exp>/plan.previous.json``. Returns (the
    plan's path on the device, its local copy in ``into``)."""
    spirv = (prev / RAN / RAN_SPIRV).is_dir()
    home = layout.device_spirv(kernel) if spirv else layout.device_kernels(kernel)
    remote_k = home + PREVIOUS_SUFFIX
    r.transport.push(prev / RAN / (RAN_SPIRV if spirv else "kernels"), remote_k)
    doc = _plan_doc(prev / RAN / layout.PLAN)
    for prog in doc.get("programs", []):
        src = prog.get("source", "")
        if src.startswith(home + "/"):
            prog["source"] = f"{remote_k}/{Path(src).name}"
    local = into / PREVIOUS_PLAN
    write_json(doc, local)
    remote = f"{layout.plan_dir_rel(exp)}/{PREVIOUS_PLAN}"
    r.transport.push(local, remote)
    return remote, local


def gemm_ran(version: str, specs: list[dict[str, Any]], runner: str | Path) -> dict[str, Any]:
    """What a GEMM sweep of ``version`` runs, kept in its result under ``ran``: the staged
    ``gemm.cl`` (text), each shape's bench-gemm spec (its source path left out), the runner's
    sha256 and the build key over the source and the specs."""
    with tempfile.TemporaryDirectory(prefix="phonetrain-ran-") as tmp:
        src = stage_kernels(version, Path(tmp)) / "gemm.cl"
        texts = {"gemm.cl": src.read_text()} if src.is_file() else {}
    plain = [{k: v for k, v in sp.items() if k != "source"} for sp in specs]
    return {"sources": texts, "specs": plain, "runner_sha256": sha256_file(runner),
            "build_key": build_key(texts, [json.dumps(sp, sort_keys=True) for sp in plain])}


def previous_gemm(out: Path, results_root: Path) -> dict[str, Any] | None:
    """The GEMM sweep a rerun of ``out`` replaces: ``out`` itself, else the newest copy in
    ``quarantine/``, that keeps what it ran (``ran``); None when there is none."""
    rel = out.resolve().relative_to(results_root.resolve())
    q = results_root / "quarantine"
    cands = [out] + ([q / t / rel for t in sorted((p.name for p in q.iterdir()), reverse=True)]
                     if q.is_dir() else [])
    for c in cands:
        try:
            doc = read_json(c)
        except ResultsFileError:   # missing or damaged: not a previous sweep
            continue
        if isinstance(doc.get("ran"), dict) and doc.get("rows"):
            return doc
    return None


def identical_gemm(prev: dict[str, Any] | None, ran: dict[str, Any],
                   kernel_hash: str | None) -> str | None:
    """Why a GEMM sweep with ``ran`` needs no measuring (the previous sweep, of another kernel
    hash, ran the same build key with the same runner), else None."""
    if prev is None or prev.get("kernel_hash") == kernel_hash:
        return None
    old = prev["ran"]
    if old.get("build_key") == ran["build_key"] and \
            old.get("runner_sha256") == ran["runner_sha256"]:
        return "the kernel sources differ only in comments and white space"
    return None


def previous_doc(prev: Path) -> dict[str, Any]:
    """What ``paired.json`` says of the previous run: its folder and kernel hash."""
    return {"previous": str(prev),
            "previous_kernel_hash": read_json(prev / RAN / RAN_JSON).get("kernel_hash")}


def measured_walls(run_dir: Path) -> list[float]:
    """The measured (not warm-up) iterations' wall times (ms), in order, of one side's
    ``run.json``."""
    return [i["wall_ms"] for i in read_json(run_dir / layout.RUN).get("iters", [])
            if not i.get("warmup")]


def _median(x: list[float]) -> float | None:
    if not x:
        return None
    x, n = sorted(x), len(x)
    return x[n // 2] if n % 2 else (x[n // 2 - 1] + x[n // 2]) / 2


def side_medians(previous: Path, new: Path) -> tuple[float | None, float | None]:
    """One pair's figures (ms): the median step time of each side of one side-by-side
    process over the rounds both sides ran -- the first ``min(n_previous, n_new)`` measured
    iterations of each. A side that reached its interval sooner stops while the other goes on
    (``src/runner/run.c``); the other's later iterations ran alone, so whatever the host did
    then would fall on one side only, and they are left out of the pair."""
    a, b = measured_walls(previous), measured_walls(new)
    n = min(len(a), len(b))
    return _median(a[:n]), _median(b[:n])


Measure = Callable[[dict[str, Any], Path, tuple[str, Path]], Path]
"""(manifest, the new side's folder, (the previous plan as the device sees it, the previous
side's folder)) -> the new side's folder, or the run folder: one runner process measuring
both sides (:meth:`phonetrain.runner.Runner.run` ``previous=``)."""


def measure_pairs(measure: Measure, manifest: dict[str, Any], prev_plan: str, into: Path,
                  rounds: int, start: int = 0) -> list[tuple[Path, Path]] | Path:
    """``rounds`` pairs, each one runner process measuring previous (plan ``prev_plan`` on
    the device) and new side by side, into ``into/previous_<k>`` and ``into/process_<k>``.
    Returns [(previous, new)] or the run folder (the device cannot do the run: recorded
    skipped or oom)."""
    out = []
    for k in range(start, start + rounds):
        old, new = into / f"previous_{k}", into / f"process_{k}"
        got = measure(manifest, new, (prev_plan, old))
        if got != new:   # recorded skipped or oom
            return got
        out.append((old, new))
    return out


def verified_process(into: Path) -> bool:
    """Whether ``into``, the new side's folder of a :func:`measure_pairs` process, is the
    process verified per step (the first pair's, ``process_0``, with ``previous_0``: both
    sides keep checkpoints); the other pairs' processes need none."""
    return into.name == "process_0"


def pairs_until_decisive(measure: Measure, manifest: dict[str, Any], prev_plan: str,
                         into: Path, first: int, max_pairs: int = RUN_MAX_PAIRS,
                         budget_s: float = RUN_BUDGET_S
                         ) -> tuple[list[tuple[Path, Path]], dict[str, Any]] | Path:
    """Pairs of :func:`measure_pairs` (one process at a time) until the verdict is decisive
    (:func:`phonetrain.results.paired.until_decisive`: the first look after ``first`` pairs,
    at most ``max_pairs`` pairs and ``budget_s`` seconds). Returns ([(previous, new)], the
    verdict with each pair's figures in ms) or the run folder (the device cannot do the run:
    recorded skipped or oom)."""
    done: list[tuple[Path, Path]] = []
    stopped: list[Path] = []

    def pair(k: int) -> tuple[float | None, float | None] | None:
        got = measure_pairs(measure, manifest, prev_plan, into, 1, start=k)
        if isinstance(got, Path):
            stopped.append(got)
            return None
        done.extend(got)
        return side_medians(*got[0])

    doc = until_decisive(pair, first=first, max_pairs=max_pairs, budget_s=budget_s)
    return stopped[0] if stopped else (done, doc)


def note(run: str, doc: dict[str, Any]) -> None:
    """One stderr line about a side-by-side measurement."""
    print(f"phonetrain: run {run}, side by side: {doc['verdict']} ({doc['reason']}; "
          f"{doc['pairs']} pairs of at most {doc['max_pairs']}, {doc['elapsed_s']:.0f} s of "
          f"{doc['budget_s']:g} s)", file=sys.stderr)


def install_previous(pairs: list[tuple[Path, Path]], main: Path) -> None:
    """Move the previous build's folders (its side of each pair's process) to
    ``main/previous/process_<k>``."""
    dest = main / PREVIOUS
    dest.mkdir(parents=True, exist_ok=True)
    for k, (a, _) in enumerate(pairs):
        os.replace(a, dest / f"process_{k}")
