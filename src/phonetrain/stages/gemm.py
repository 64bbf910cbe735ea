"""GEMM study stages: per-device tuning of the optimized kernel versions (whose result the
runs' plans use), the GEMM sweep per device x version (and the runner's CPU backend), and each
device's peaks (the roofline's ceilings).

Stages, with params :class:`~phonetrain.stages.specs.GemmSpec` (``gemm``),
:class:`~phonetrain.stages.specs.TuneSpec` (``tune``), :class:`~phonetrain.stages.specs.SquaresSpec`
(``tune_squares``), :class:`~phonetrain.stages.specs.DeviceSpec` (``peaks``) or
:class:`~phonetrain.stages.specs.ShapesSpec` (``gemm-shapes``):

- ``gemm-shapes``: output ``shapes`` (the models' GEMM calls,
  :func:`phonetrain.stages.params.models_gemm_shapes`; read by gemm through
  :func:`read_shapes`, which checks them against the spec's ``shapes_hash``);
- ``tune-version`` (:class:`~phonetrain.stages.specs.TuneVersionSpec`, the workflow's one tune
  job per device x version): inputs ``runner``, ``sources``; outputs ``tuning`` (one file
  per class, ``tuning/<class>.json``, :mod:`phonetrain.kernels.tuning`: the
  GEMM call its name gives) and ``squares`` (``tuning/squares.json``: the sweep's square
  sizes up to ``tune_max_launch_s`` per launch, each its own class). Each file is the one
  :func:`tune` or :func:`tune_squares` writes for its own class's spec, and a file that
  already records that spec and this runner is kept as it is (:func:`tune_version`); on a
  local device a tuning this machine measured before for the same spec is reused
  (:mod:`phonetrain.stages.tuning_records`). With ``api`` ``vulkan`` the job tunes the
  version's GEMM shaders on the device's Vulkan device instead: the candidates of its
  ``vk/tuning.yaml`` (:func:`phonetrain.kernels.spirv.shader_candidates`), each timed by
  :class:`~phonetrain.stages.vk_bench.VkBench` and picked per class as on OpenCL;
- ``gemm``: inputs ``runner``, ``shapes``, ``sources`` (none for ``cpu``), ``tuning`` (the
  version's class files: every class of the models' shapes and ``squares.json``; none for an
  untunable version); output ``gemm`` (the version's measurements: models' GEMM shapes, then
  square sizes ascending until one launch would take longer than ``max_launch_s`` or the
  squares' GFLOPS plateaued (:func:`plateaued`); each with the configuration tuned for it,
  :func:`phonetrain.kernels.tuning.class_for`);
- ``peaks``: input ``runner``; output ``peaks`` (runner bench-peak).
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from phonetrain import layout
from phonetrain.devices import is_this_host
from phonetrain.errors import ResultsFileError, StageError
from phonetrain.io import read_json, write_json
from phonetrain.kernels import KernelVersion, load_version, stage_kernels, tuning
from phonetrain.kernels.gemm import GemmShape, gemm_source, gemm_spec
from phonetrain.kernels.spirv import shader_candidates
from phonetrain.results.paired import many_until_decisive, until_decisive
from phonetrain.runner import DeviceSelector, Runner, RunnerError
from phonetrain.stages.stamp import STAMP, made_from, stamp
from phonetrain.stages.job import Job, files, main
from phonetrain.stages import paired as kept
from phonetrain.stages import tuning_records
from phonetrain.stages.specs import (CPU_VERSION, DeviceSpec, GemmSpec, ShapesSpec, SquaresSpec,
                                     TuneSpec, TuneVersionSpec, classes_hash, shapes_hash,
                                     to_params)

if TYPE_CHECKING:   # pandas is imported by the functions that build frames, not by the jobs
    import pandas as pd

    from phonetrain.stages.vk_bench import VkBench   # numpy: the Vulkan tune jobs' only


def write_shapes(job: Job) -> Path:
    """The models' GEMM calls (:func:`phonetrain.stages.params.models_gemm_shapes` of the
    spec's models) -> ``output.shapes`` (``{"shapes": [{"kernel", "M", "N", "K",
    "source"}]}``)."""
    from phonetrain.stages.params import models_gemm_shapes  # lowers models: only this job

    s = job.spec(ShapesSpec)
    write_json({"shapes": models_gemm_shapes(s.models), STAMP: stamp(job)}, job.output.shapes)
    return Path(job.output.shapes)


def read_shapes(path: str | Path, want_hash: str) -> list[dict[str, Any]]:
    """The shape list of ``path`` (:func:`write_shapes`). Raises :class:`StageError` when its
    hash is not ``want_hash`` (the file is not the study's)."""
    shapes = read_json(path)["shapes"]
    if shapes_hash(shapes) != want_hash:
        raise StageError(f"{path}: GEMM shapes hash {shapes_hash(shapes)}, not the study's "
                         f"{want_hash}; rerun its gemm_shapes job")
    return shapes


def _shapes(shapes: list[dict[str, Any]]) -> list[GemmShape]:
    return [GemmShape(s["kernel"], s["M"], s["N"], s["K"]) for s in shapes]


class _Bench:
    """One device's runner, with the runner and (optionally) a kernel version deployed, running
    bench-gemm specs into a temporary folder."""

    def __init__(self, job: Job, s: DeviceSpec | GemmSpec | TuneSpec | SquaresSpec,
                 version: str | None):
        self.r = Runner.for_device(s.device_config, job.runtime.at(s.stage_root),
                                   timeout_s=job.runtime.timeout_s)
        self.tmp = tempfile.TemporaryDirectory(prefix="phonetrain-gemm-")
        self.n = 0
        self.r.push_runner(job.input.runner)
        if version:
            self.r.transport.push(stage_kernels(version, Path(self.tmp.name)),
                                  layout.device_kernels(version))

    def out(self) -> Path:
        self.n += 1
        return Path(self.tmp.name) / f"out-{self.n}"

    def spec(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Run one bench-gemm spec (a failure raises the runner's error: a tuning trial
        records it; the gemm stage fails with it). A spec whose cases carry n distinct build
        options (the configurations of several processes in one) gets n times the runner's
        ``timeout_s``."""
        configs = len({c["options"] for c in spec["cases"] if "options" in c})
        return self.r.bench_gemm(spec, self.out(),
                                 timeout_s=self.r.timeout_s * max(1, configs))


def _tune_bench(job: Job, p: TuneSpec | SquaresSpec | TuneVersionSpec,
                version: str) -> _Bench | VkBench:
    """The device's runner for a tune job: bench-gemm on OpenCL, or (``api`` ``vulkan``) the
    version's GEMM shaders through plans (:class:`~phonetrain.stages.vk_bench.VkBench`)."""
    if p.api == "vulkan":
        from phonetrain.stages.vk_bench import VkBench

        r = Runner.for_device(p.device_config, job.runtime.at(p.stage_root),
                              timeout_s=job.runtime.timeout_s)
        return VkBench(r, job.input.runner, version)
    return _Bench(job, p, version)


def _probe(bench: _Bench | VkBench, version: KernelVersion, source: str, min_time_ms: float,
           backend: str = "opencl"):
    """``n -> GFLOPS`` of the version's defaults at square size n (None when it fails or the
    device lacks what the version needs)."""
    def measure(n: int) -> float | None:
        spec = gemm_spec(version, [GemmShape("gemm_nn", n, n, n)], source=source,
                         backend=backend, min_time_ms=min_time_ms, repeats=1)
        try:
            doc = bench.spec(spec)
        except RunnerError:
            return None
        cases = doc.get("cases") or [{}]
        return cases[0].get("gflops") if cases[0].get("status") == "ok" else None
    return measure


def tune(job: Job, bench: _Bench | None = None) -> dict:
    """Tune one version on one device for one class (``spec.cls``, the GEMM call
    :func:`phonetrain.kernels.tuning.class_shape` gives) and write ``output.tuning``. With
    ``tune`` false only the version's defaults run (still checked). ``bench``: the device's
    runner with the version deployed, made here when None. Raises
    :class:`~phonetrain.errors.StageError` when no candidate passes."""
    p = job.spec(TuneSpec)
    try:
        shape = tuning.class_shape(p.cls)
    except ValueError as e:
        raise StageError(str(e)) from None
    return _tune(job, p, [shape], [], bench)


def tune_squares(job: Job, bench: _Bench | None = None) -> dict:
    """Tune one version on one device for each square size of the sweep whose launch is
    expected within ``tune_max_launch_s`` (:func:`phonetrain.kernels.tuning.tunable_squares`),
    each its own class, and write ``output.tuning``; with ``tune`` false no square is tuned
    (the file then holds no class)."""
    p = job.spec(SquaresSpec)
    return _tune(job, p, [], p.sizes, bench)


def tune_version(job: Job) -> dict[str, dict]:
    """Tune one version on one device for each class of its output ``tuning`` (one file per
    class, ``tuning/<class>.json``, whose names hash to ``spec.classes_hash``) and for the
    sweep's square sizes (output ``squares``), each file as :func:`tune` or
    :func:`tune_squares` writes it for its own class's spec
    (:meth:`~phonetrain.stages.specs.TuneVersionSpec.class_spec`). A file that
    already records its class's spec and this runner (:func:`phonetrain.stages.stamp.made_from`)
    is kept untouched: the workflow leaves these outputs in place while the job runs
    (Snakemake's ``update`` flag), so a study that gains a model tunes only the classes it
    brings, and the runs that read a kept file rerun nothing. The classes still to tune are
    tuned together (:func:`_tune_classes`: on OpenCL one runner process per tuning pass for
    every candidate and all of them, each file still its own class's). Returns class -> document. Raises
    :class:`~phonetrain.errors.StageError` when the outputs are not the spec's classes or a
    class cannot be tuned."""
    p = job.spec(TuneVersionSpec)
    out = {Path(f).stem: f for f in _many(job.output.tuning)}
    if classes_hash(list(out)) != p.classes_hash:
        raise StageError(f"tune {p.kernel} on {p.device}: the output files' classes hash to "
                         f"{classes_hash(list(out))}, not the spec's {p.classes_hash}")
    work = [(c, to_params(p.class_spec(c)), out[c], tune) for c in sorted(out)]
    work.append((tuning.SQUARES, to_params(p.squares_spec()), job.output.squares, tune_squares))
    bench, docs, unchanged, models = None, {}, [], {}
    for cls, params, path, stage in work:
        doc = _current(path, params, job.input.runner)
        if doc is not None:
            docs[cls] = doc
            unchanged.append(cls)
            continue
        bench = bench or _tune_bench(job, p, p.kernel)
        one = Job(job.input, files({"tuning": path}), params, job.log, job.runtime, job.expect)
        if stage is tune:
            models[cls] = one   # tuned together below: one process per pass
        else:
            docs[cls] = stage(one, bench)
    if models:
        docs |= _tune_classes(p, models, bench)
    if unchanged:
        print(f"phonetrain: tune {p.kernel} on {p.device}: kept {len(unchanged)} of {len(work)} "
              "tuning files made with these settings and this runner", file=sys.stderr)
    return docs


def _many(v: str | list[str]) -> list[str]:
    return list(v) if isinstance(v, list) else [v]


def _current(path: str, params: dict[str, Any], runner: str) -> dict | None:
    """The tuning document at ``path`` when it records ``params`` and the runner binary at
    ``runner``; None when it is missing, unreadable or made otherwise."""
    if not Path(path).is_file():
        return None
    try:
        doc = read_json(path)
    except ResultsFileError:
        return None
    return doc if made_from(doc, params, runner) else None


def _tune(job: Job, p: TuneSpec | SquaresSpec, shapes: list[GemmShape],
          sizes: list[int], bench: _Bench | None = None) -> dict:
    """Tune ``shapes`` (each its own class) and the tunable squares of ``sizes`` on the device
    and write ``output.tuning``; nothing to tune gives a document without classes."""
    version = load_version(p.kernel)
    bench = bench or _tune_bench(job, p, version.name)
    kept = _reused(job, p, bench)
    if kept is not None:
        return kept
    source, target = _target(p, version)
    doc = {"version": version.name, "classes": {}, "default": None, "trials": []}
    with bench.r.lock():
        squares = tuning.tunable_squares(
            sizes, _probe(bench, version, source, p.tune_min_time_ms,
                          target.get("backend", "opencl")),
            p.tune_max_launch_s) if p.tune and sizes else []
        try:
            if shapes or squares:
                doc = tuning.tune(version, shapes, bench.spec, source=source,
                                  min_time_ms=p.tune_min_time_ms,
                                  defaults_only=not p.tune, squares=squares,
                                  together=True, **target, **_passes(p))
        except tuning.TuningError as e:
            raise StageError(str(e)) from None
    return _write_tuning(job, p, doc, bench)


def _tune_classes(p: TuneVersionSpec, jobs: dict[str, Job], bench: _Bench) -> dict[str, dict]:
    """Tune the model classes of ``jobs`` (class -> its one-class job, whose output is the
    class's file) together: each file as :func:`tune` writes it, reused from this machine's
    records where one matches; the others from one :func:`phonetrain.kernels.tuning.tune`
    over all their calls (on OpenCL one runner process per pass for every candidate,
    :func:`phonetrain.kernels.trials.run_candidates`; else one per candidate), each class's
    share of it (:func:`phonetrain.kernels.tuning.class_doc`) in its file."""
    docs, fresh = {}, []
    for cls, one in jobs.items():
        kept = _reused(one, one.spec(TuneSpec), bench)
        if kept is None:
            fresh.append(cls)
        else:
            docs[cls] = kept
    if not fresh:
        return docs
    version = load_version(p.kernel)
    try:
        shapes = [tuning.class_shape(c) for c in fresh]
    except ValueError as e:
        raise StageError(str(e)) from None
    source, target = _target(p, version)
    with bench.r.lock():
        try:
            doc = tuning.tune(version, shapes, bench.spec, source=source,
                              min_time_ms=p.tune_min_time_ms, defaults_only=not p.tune,
                              together=True, **target, **_passes(p))
        except tuning.TuningError as e:
            raise StageError(str(e)) from None
    for cls in fresh:
        one = jobs[cls]
        docs[cls] = _write_tuning(one, one.spec(TuneSpec), tuning.class_doc(doc, cls, fresh),
                                  bench)
    return docs


def _target(p: TuneSpec | SquaresSpec | TuneVersionSpec, version: KernelVersion
            ) -> tuple[str, dict[str, Any]]:
    """(the version's source as the runner sees it, :func:`phonetrain.kernels.tuning.tune`'s
    backend and candidate space): its ``gemm.cl`` on OpenCL; with ``api`` ``vulkan`` its
    SPIR-V folder and the shaders' candidates (``vk/tuning.yaml``)."""
    if p.api == "vulkan":
        return layout.device_spirv(version.name), {
            "backend": "vulkan", "space": shader_candidates(version.name)}
    return f"{layout.device_kernels(version.name)}/gemm.cl", {}


def _passes(p: TuneSpec | SquaresSpec | TuneVersionSpec) -> dict[str, Any]:
    """:func:`phonetrain.kernels.tuning.tune`'s screening settings of a spec (none: one pass)."""
    if not p.tune_finalists:
        return {}
    return {"finalists": p.tune_finalists,
            "screen_min_time_ms": p.tune_screen_min_time_ms or p.tune_min_time_ms}


def _reused(job: Job, p: TuneSpec | SquaresSpec, bench: _Bench) -> dict | None:
    """On a local device, the tuning this machine measured before for the same spec
    (:mod:`phonetrain.stages.tuning_records`), written to ``output.tuning``; None else."""
    if not is_this_host(p.device_config):
        return None
    record = tuning_records.record_path(bench.r.transport.facts(), to_params(p))
    kept = tuning_records.recall(record)
    if kept is None:
        return None
    kept[STAMP] = stamp(job)
    tuning.write_tuning(kept, job.output.tuning)
    print(f"phonetrain: tune {p.kernel} on {p.device}: reused this machine's tuning "
          f"of the same sources and settings ({record}; tuned {kept.get('tuned_at', '?')})",
          file=sys.stderr)
    return kept


def _write_tuning(job: Job, p: TuneSpec | SquaresSpec, doc: dict, bench: _Bench) -> dict:
    """Write a measured tuning document to ``output.tuning`` (device, kernel hash, stamp
    added) and, on a local device, keep it in this machine's records."""
    doc.update(device=p.device, kernel_hash=p.kernel_hash, **({"api": p.api} if p.api else {}))
    doc[STAMP] = stamp(job)
    tuning.write_tuning(doc, job.output.tuning)
    if is_this_host(p.device_config):
        tuning_records.keep(tuning_records.record_path(bench.r.transport.facts(),
                                                       to_params(p)), doc)
    return doc


def _groups(shapes: list[dict[str, Any]], sizes: list[int]) -> list[tuple[str, GemmShape]]:
    """(shape source, shape): the models' GEMM calls, then the square sizes ascending."""
    out = [(s["source"], GemmShape(s["kernel"], s["M"], s["N"], s["K"])) for s in shapes]
    return out + [("square", GemmShape("gemm_nn", n, n, n)) for n in sorted(sizes)]


def gemm(job: Job) -> dict:
    """GFLOPS of one version (``params.version``; ``cpu`` = the runner's CPU backend) on one
    device -> ``output.gemm``. A tuned version uses its tuning files' configuration per shape
    class; a long square gets fewer timed repeats (:func:`sweep_repeats`, the row's
    ``repeats``); the squares stop where their GFLOPS plateaued (:func:`plateaued`); the
    models' calls of one OpenCL configuration share a process (:func:`_model_calls_together`),
    and so do an OpenCL version's squares when none is measured side by side
    (:func:`_squares_together`)."""
    p = job.spec(GemmSpec)
    version = p.version
    kv = None if version == CPU_VERSION else load_version(version)
    tuning_files = job.many("tuning")
    tuned = tuning.load_tunings(tuning_files) if tuning_files else None
    bench = _Bench(job, p, version if kv else None)
    rows: list[dict[str, Any]] = []
    doc_out: dict[str, Any] = {"device": p.device, "version": version, "status": "ok",
                               "rows": rows}
    last_gflops = None
    planned = _planned(p, kv, tuned, read_shapes(job.input.shapes, p.shapes_hash))
    prev = None
    if kv is not None:
        doc_out["ran"] = kept.gemm_ran(version, [sp for _, _, _, sp in planned],
                                       job.input.runner)
        prev = kept.previous_gemm(Path(job.output.gemm), Path(job.output.gemm).parents[2])
        same = kept.identical_gemm(prev, doc_out["ran"], p.kernel_hash)
        if same:
            return _identical(job, doc_out, prev, same)
    with bench.r.lock():
        before = _previous_specs(bench, prev, version, doc_out.get("ran"), p.kernel_hash,
                                 planned)
        batched = _paired_batches(bench, planned, before, prev)
        calls = [sp for source, g, _, sp in planned
                 if source != "square" and (g.kernel, g.M, g.N, g.K) not in before]
        alone = _model_calls_together(bench, calls) if kv is not None else \
            [bench.spec(sp) for sp in calls]
        square_specs = [sp for source, _, _, sp in planned if source == "square"]
        together = kv is not None and not any(
            (g.kernel, g.M, g.N, g.K) in before for source, g, _, _ in planned
            if source == "square")
        swept: list[dict[str, Any]] | None = None   # the squares' documents, run together
        squares: list[float] = []   # the measured squares' GFLOPS, ascending sizes
        for source, g, cls, spec in planned:
            doc = None
            if together and source == "square":
                if swept is None:
                    swept = _squares_together(bench, square_specs, p)
                doc = swept.pop(0)
            why = _skipped_why(doc, source, g, last_gflops, squares, p)
            if why:
                rows.append({"kernel": g.kernel, "M": g.M, "N": g.N, "K": g.K, "source": source,
                             "status": "skipped", "error": why})
                continue
            key = (g.kernel, g.M, g.N, g.K)
            old = before.get(key)
            reps = sweep_repeats(g, source, last_gflops, p.max_shape_s)
            if doc is not None:
                reps = (doc.get("cases") or [{}])[0].get("repeats", reps)
            elif old is not None:
                doc = batched[key]() if key in batched else \
                    _paired_shape(bench, spec, old, _previous_call_ms(prev, key))
            elif source != "square":
                doc = alone.pop(0)
            else:
                doc = bench.spec(dict(spec, repeats=reps))
            if doc.get("status") == "skipped":
                doc_out.update(status="skipped", reason=doc.get("reason", ""))
                break
            doc_out["device_info"] = doc.get("device") or {}
            for c in doc["cases"]:
                rows.append(_row(c, doc, source, cls, None if old is not None else reps,
                                 p.device, prev))
                if source == "square" and c["status"] == "ok":
                    last_gflops = c["gflops"]
                    squares.append(c["gflops"])
    if kv is not None:
        doc_out["kernel_hash"] = p.kernel_hash
    doc_out[STAMP] = stamp(job)
    write_json(doc_out, job.output.gemm)
    return doc_out


def _skipped_why(doc: dict[str, Any] | None, source: str, g: GemmShape,
                 last_gflops: float | None, squares: list[float], p: GemmSpec) -> str | None:
    """Why a shape of the sweep is skipped (:data:`SKIPPED_BY`), or None: the rule the runner
    named in ``doc`` (a square of :func:`_squares_together`); else, for a square measured on
    its own, one launch estimated at ``last_gflops`` (the square before) over
    ``p.max_launch_s``, or the ``squares``' GFLOPS (ascending sizes) :func:`plateaued`."""
    if doc is not None:
        return SKIPPED_BY.get((doc.get("cases") or [{}])[0].get("skipped_by"))
    if source != "square":
        return None
    if last_gflops and g.flops / (last_gflops * 1e9) > p.max_launch_s:
        return SKIPPED_BY["max_launch_s"]
    return SKIPPED_BY["plateau"] if plateaued(squares, p.plateau_gain) else None


def _row(c: dict[str, Any], doc: dict[str, Any], source: str, cls: str | None,
         reps: int | None, device: str, prev: dict[str, Any] | None) -> dict[str, Any]:
    """The ``gemm.json`` row of case ``c`` of the bench-gemm document ``doc``: its figures,
    the shape's ``source``, its build options, its tuned class, ``repeats`` (``reps``; None
    for a shape measured side by side, whose ``paired`` holds its timing) and ``paired``
    where the document has a verdict (with ``device`` and the ``prev`` sweep's kernel
    hash)."""
    return {**{k: c.get(k) for k in ("kernel", "M", "N", "K", "global", "local", "status",
                                     "error", "gflops", "median_ms", "low_ms", "high_ms",
                                     "max_err", "iterations")},
            "source": source, "options": c.get("options", doc.get("options", "")),
            "tuned_class": cls, **({"repeats": reps} if reps is not None else {}),
            **({"paired": doc["paired"] | {
                "device": device, "previous_kernel_hash": (prev or {}).get("kernel_hash")}}
               if "paired" in doc else {})}


def _model_calls_together(bench: _Bench, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run the models' GEMM calls measured alone (one bench-gemm spec of one case each, in
    sweep order) in one runner process: the specs that differ only in their case and build
    options (another tuned configuration) share a process, each case carrying its options
    (the runner builds each configuration once) and still checked, warmed up, calibrated and
    timed on its own (``src/runner/bench_gemm.c``), so a call costs its timed repeats, not a
    process start, an OpenCL set-up and a program build (OpenCL versions only: the CPU backend's calls
    keep a process each; a tiny call is calibrated on one launch, and once other load takes
    the cores of its OpenMP threads a launch can run tens of times slower, which stretched
    one process of every call to 123 s at load 9-10: docs/notebook/2026-12-07.md).
    Returns one document per spec, in order,
    each holding its own case; a process the runner skips (a missing library) gives that
    document to each of its specs. Raises :class:`StageError` when a configuration does not
    build (:func:`_built`)."""
    groups: dict[str, list[int]] = {}
    for i, sp in enumerate(specs):
        groups.setdefault(json.dumps({k: v for k, v in sp.items()
                                      if k not in ("cases", "options")},
                                     sort_keys=True), []).append(i)
    out: list[dict[str, Any] | None] = [None] * len(specs)
    for idx in groups.values():
        doc = _built(bench.spec(dict(specs[idx[0]], cases=[
            dict(c, options=specs[i]["options"]) for i in idx for c in specs[i]["cases"]])))
        cases = doc.get("cases") or []
        for n, i in enumerate(idx):
            out[i] = doc if doc.get("status") == "skipped" else \
                dict(doc, cases=cases[n * len(specs[i]["cases"]):
                                     (n + 1) * len(specs[i]["cases"])])
    return [d for d in out if d is not None]


def _squares_together(bench: _Bench, specs: list[dict[str, Any]], p: GemmSpec
                      ) -> list[dict[str, Any]]:
    """An OpenCL version's squares (their bench-gemm specs of one case each, ascending sizes)
    in one runner process: one spec whose cases carry their own build options (the runner
    builds each distinct configuration once) and whose ``sweep`` makes the runner apply
    :func:`plateaued` and :func:`sweep_repeats` between the squares (``src/runner/
    bench_gemm.c``; ``max_launch_s``, ``plateau_gain``, ``max_shape_s`` of ``p``), so the
    squares cost one process start, one OpenCL context and one build per configuration, not
    one of each per square. Returns one document per spec, in order, each holding its own case
    (a case the runner skipped: ``status`` ``skipped``, ``skipped_by`` naming the rule,
    :data:`SKIPPED_BY`); a process the runner skips (a missing library) gives that document
    to each spec. Raises :class:`StageError` when a configuration does not build
    (:func:`_built`)."""
    if not specs:
        return []
    first = specs[0]
    doc = _built(bench.spec(dict(first, cases=[dict(sp["cases"][0], options=sp["options"])
                                        for sp in specs],
                          sweep={"max_launch_s": p.max_launch_s,
                                 "plateau_gain": p.plateau_gain or 0.0,
                                 "plateau_cases": PLATEAU_SQUARES,
                                 "max_case_s": p.max_shape_s or 0.0,
                                 "min_repeats": GEMM_MIN_REPEATS})))
    if doc.get("status") == "skipped":
        return [doc] * len(specs)
    return [dict(doc, cases=[c]) for c in doc.get("cases") or []]


def _built(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc``, a bench-gemm document whose cases carry their own build options; raises
    :class:`StageError` with the runner's message when one of them did not build (the sweep
    fails as it does when a process of one configuration does not build; the compiler log is
    in the runner's stderr, the stage's log)."""
    bad = next((c for c in doc.get("cases") or [] if c.get("build_failed")), None)
    if bad is not None:
        raise StageError(f"bench-gemm: {bad.get('error')}; fix the kernel source; the "
                         "compiler log is in the stage's log")
    return doc


PLATEAU_SQUARES = 2
"""Squares in a row whose GFLOPS stay below ``(1 + measure.gemm_plateau_gain)`` x the best
square before them, after which a version's square sweep stops (:func:`plateaued`)."""
SKIPPED_BY = {
    "max_launch_s": "estimated launch time over measure.gemm_max_launch_s",
    "plateau": (f"GFLOPS plateaued: {PLATEAU_SQUARES} squares in a row below "
                f"(1 + measure.gemm_plateau_gain) x the best before them")}
"""A skipped square's row ``error`` by the rule that skipped it (the runner's ``skipped_by``):
one launch estimated over ``measure.gemm_max_launch_s``, or :func:`plateaued`."""


def plateaued(gflops: list[float], gain: float | None) -> bool:
    """Whether a square sweep whose measured squares reached ``gflops`` (GFLOPS, ascending
    sizes) has plateaued: each of its last :data:`PLATEAU_SQUARES` squares reached less than
    ``(1 + gain)`` x the best GFLOPS of the squares before it (``gain``:
    ``measure.gemm_plateau_gain``; None or 0: never). Like the bandwidth sweep's knee: once
    doubling the size twice in a row gained less than ``gain``, a larger square is expected
    to add a costlier point of the same curve, not a higher peak. Two squares, not one: a
    single flat step (CLBlast on PoCL: 512^3 2% over 256^3, then 1024^3 55% over it) is
    not yet the plateau."""
    if not gain or len(gflops) <= PLATEAU_SQUARES:
        return False
    n = len(gflops)
    return all(gflops[i] < (1 + gain) * max(gflops[:i]) for i in range(n - PLATEAU_SQUARES, n))


GEMM_REPEATS, GEMM_MIN_REPEATS = 5, 3
"""Timed repeats of a GEMM sweep shape (each at least ``measure.gemm_min_time_ms``), and the
fewest a long launch gets (:func:`sweep_repeats`): three give a median and its interval."""


def sweep_repeats(g: GemmShape, source: str, last_gflops: float | None,
                  max_shape_s: float | None) -> int:
    """Timed repeats of one shape of the sweep: :data:`GEMM_REPEATS`, or for a square whose
    one launch is expected (at ``last_gflops``, the square before it) to take over a fifth of
    ``max_shape_s`` (``measure.gemm_max_shape_s``, s) ``floor(max_shape_s / launch)``, at
    least :data:`GEMM_MIN_REPEATS`. None or 0, a model's call or no square before: 5."""
    if not max_shape_s or source != "square" or not last_gflops or not last_gflops > 0:
        return GEMM_REPEATS
    launch_s = g.flops / (last_gflops * 1e9)
    return max(GEMM_MIN_REPEATS, min(GEMM_REPEATS, int(max_shape_s / launch_s)))


def _planned(p: GemmSpec, kv: KernelVersion | None, tuned: dict | None,
             shapes: list[dict[str, Any]]) -> list[tuple[str, GemmShape, str | None, dict]]:
    """(shape source, shape, tuning class, bench-gemm spec) of every shape of the sweep, in
    order: the configuration tuned for its class where the version is tuned."""
    out = []
    for source, g in _groups(shapes, p.sizes):
        v, cls = kv, None
        if tuned and tuned["classes"] and kv is not None:
            cls = tuning.class_for(g, source, tuned)
            v = tuning.candidate_version(kv, tuned["classes"][cls])
        spec = gemm_spec(v, [g], source=f"{layout.device_kernels(p.version)}/gemm.cl",
                         backend="cpu" if kv is None else "opencl",
                         min_time_ms=p.min_time_ms, repeats=5, threads=p.threads)
        out.append((source, g, cls, spec))
    return out


PAIRED_FIRST, PAIRED_MAX, PAIRED_BUDGET_S = 3, 16, 15.0
"""Pairs per GEMM shape of a side-by-side rerun (:func:`phonetrain.results.paired.
until_decisive`): a first look after 3 pairs, then one more pair while the verdict is ``cannot
tell``, at most 16 pairs and 15 s per shape (a shape measured alone: one process) -- or, for a
long call, the time of :data:`PAIRED_BUDGET_PAIRS` pairs (:func:`paired_budget_s`)."""
PAIRED_REPEATS, PAIRED_MIN_TIME_MS = 5, 10.0
"""Each build in a pair's process: the median of up to 5 timed repeats (the 5 of a shape
measured alone), each repeat at least 10 ms of launches (``measure.gemm_min_time_ms`` when longer): a
repeat of one ~1 ms launch is at the mercy of one scheduler time slice on a busy host (a Linux
CFS slice is 0.75-6 ms). A long call takes fewer repeats (:func:`paired_repeats`)."""
PAIRED_PROCESS_MS, PAIRED_BUDGET_PAIRS = 1000.0, 8
"""A pair's process times about 1 s of calls per build (at least one repeat): a 1.8 s call
timed 5 times per process made a pair cost 18 s, so 3 pairs spent a 15 s budget 6 times over and the
verdict stopped undecided; a long call's shape gets the time of 8 pairs instead."""


def paired_repeats(call_ms: float | None) -> int:
    """Repeats per process of a pair for a shape whose call took ``call_ms`` (ms, the previous
    sweep's median; None: unknown): ``ceil(PAIRED_PROCESS_MS / call_ms)`` within 1 ..
    :data:`PAIRED_REPEATS`, so a process of a long call takes about 1 s, not 5 calls."""
    if not call_ms or call_ms <= 0:
        return PAIRED_REPEATS
    return max(1, min(PAIRED_REPEATS, math.ceil(PAIRED_PROCESS_MS / call_ms)))


def paired_budget_s(call_ms: float | None, repeats: int) -> float:
    """Seconds a shape may spend on pairs: :data:`PAIRED_BUDGET_S`, or the timed calls of
    :data:`PAIRED_BUDGET_PAIRS` pairs (2 builds x ``repeats`` x ``call_ms``) when longer."""
    calls_s = 2 * repeats * (call_ms or 0.0) / 1e3
    return max(PAIRED_BUDGET_S, PAIRED_BUDGET_PAIRS * calls_s)


def _previous_specs(bench: _Bench, prev: dict[str, Any] | None, version: str,
                    ran: dict[str, Any] | None, kernel_hash: str | None,
                    planned: list[tuple[str, GemmShape, str | None, dict]]
                    ) -> dict[tuple, dict[str, Any]]:
    """For a rerun whose build changed (the previous sweep kept what it ran, another kernel
    hash or build key): push the previous ``gemm.cl`` beside the new one
    (``kernels/<version>.previous/``) and return its bench-gemm spec per shape ``(kernel, M,
    N, K)``, pointed there; {} otherwise (measured alone), and for a version whose calls run
    a library rather than its ``gemm.cl`` (``clblast``: the runner pairs kernel sources only)."""
    if prev is None or ran is None or "gemm.cl" not in prev["ran"].get("sources", {}):
        return {}
    if not any(sp.get("source", "").endswith("/gemm.cl") for _, _, _, sp in planned):
        return {}
    if prev.get("kernel_hash") == kernel_hash and \
            prev["ran"].get("build_key") == ran["build_key"]:
        return {}
    folder = Path(bench.tmp.name) / "previous"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "gemm.cl").write_text(prev["ran"]["sources"]["gemm.cl"])
    remote = layout.device_kernels(version) + kept.PREVIOUS_SUFFIX
    bench.r.transport.push(folder, remote)
    out = {}
    for sp in prev["ran"].get("specs", []):
        c = (sp.get("cases") or [{}])[0]
        out[(c.get("kernel"), c.get("M"), c.get("N"), c.get("K"))] = \
            dict(sp, source=f"{remote}/gemm.cl")
    return out


def _previous_call_ms(prev: dict[str, Any] | None, key: tuple) -> float | None:
    """The previous sweep's median call (ms) of shape ``key`` ``(kernel, M, N, K)``; None when
    it has no measured row of that shape."""
    for r in (prev or {}).get("rows", []):
        if (r.get("kernel"), r.get("M"), r.get("N"), r.get("K")) == key and \
                r.get("status") == "ok" and r.get("median_ms"):
            return float(r["median_ms"])
    return None


def side_by_side(spec: dict[str, Any], old: dict[str, Any], k: int,
                 cases: list[tuple[dict, dict]] | None = None) -> dict[str, Any]:
    """The bench-gemm spec of pair ``k`` of a side-by-side rerun: ``spec`` (the new build) with
    ``old`` (the previous build's spec) under ``previous``, so that one process measures every
    case on both builds with their repeats alternating (``src/runner/bench_gemm.c``), the
    previous build first in the even repeats of even pairs, the new one first in odd pairs.
    ``cases``: [(new case, previous case)] (default: each spec's first case); the previous
    case rides in the new one under ``previous`` (its launch sizes may differ: another
    tuning)."""
    pairs = cases if cases is not None else [(spec["cases"][0], old["cases"][0])]
    return dict(spec, cases=[dict(new, previous=prev) for new, prev in pairs],
                previous={"source": old["source"], "options": old.get("options", ""),
                          "b_image_width4": old.get("b_image_width4", 0),
                          "first": 1 if k % 2 == 0 else 0})


def _sides(doc: dict[str, Any], i: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    """(new, previous) case ``i`` of a side-by-side process's document; a skipped or short
    document gives ``{"status": "skipped"}`` for both."""
    got = doc.get("cases") or []
    if doc.get("status") == "skipped" or i >= len(got):
        return {"status": "skipped"}, {"status": "skipped"}
    new = {k: v for k, v in got[i].items() if k != "previous"}
    return new, got[i].get("previous") or {"status": "skipped"}


def _new_build(doc: dict[str, Any], case: dict[str, Any] | None = None) -> dict[str, Any]:
    """A side-by-side process's document as the new build's alone: without the previous
    build's keys, with ``cases=[case]`` when given."""
    out = {k: v for k, v in doc.items() if k != "previous"}
    return out if case is None else dict(out, cases=[case])


def _paired_shape(bench: _Bench, spec: dict[str, Any], old: dict[str, Any],
                  call_ms: float | None = None) -> dict[str, Any]:
    """One GEMM shape measured side by side: bench-gemm processes that each measure the
    previous (``old``) and the new build with alternating repeats (:func:`side_by_side`), one
    process per pair, until the verdict is decisive (:data:`PAIRED_FIRST`,
    :data:`PAIRED_MAX`, :func:`paired_budget_s`; each process :func:`paired_repeats` repeats
    per build of at least :data:`PAIRED_MIN_TIME_MS`; ``call_ms``: the previous sweep's
    median call of the shape, ms, None when unknown). Returns the new build's ``gemm.json``
    with its case's figures over its processes (``median_ms``: the median of the processes'
    medians, ``low_ms``..``high_ms``: the lowest and highest) and ``paired`` (the verdict,
    :func:`phonetrain.results.paired.until_decisive`); a new build that does not run or
    verify in some process: that process's document, unpaired."""
    longer = {"repeats": paired_repeats(call_ms),
              "min_time_ms": max(float(spec["min_time_ms"]), PAIRED_MIN_TIME_MS)}
    budget_s = paired_budget_s(call_ms, longer["repeats"])
    docs: list[dict[str, Any]] = []
    news: list[dict[str, Any]] = []
    old_ok: list[bool] = []

    def pair(k: int) -> tuple[float | None, float | None] | None:
        doc = bench.spec(side_by_side(dict(spec, **longer), old, k))
        docs.append(doc)
        new, prev = _sides(doc)
        if new.get("status") != "ok":
            return None
        news.append(new)
        old_ok.append(prev.get("status") == "ok")
        return (prev.get("median_ms") if old_ok[-1] else None, new.get("median_ms"))

    verdict = until_decisive(pair, first=PAIRED_FIRST, max_pairs=PAIRED_MAX,
                             budget_s=budget_s)
    if len(news) < len(docs):
        bad = next(d for d in docs if _sides(d)[0].get("status") != "ok")
        return _new_build(bad, None if bad.get("status") == "skipped" else _sides(bad)[0])
    verdict |= {"repeats": longer["repeats"], "min_time_ms": longer["min_time_ms"]}
    if not all(old_ok):
        verdict |= {"verdict": "cannot tell", "reason": PREVIOUS_FAILED}
    return _paired_doc(docs[0], news, verdict, {})


PREVIOUS_FAILED = "the previous build did not run or verify on every pair"
BATCH_MAX_CALL_MS = PAIRED_PROCESS_MS / PAIRED_REPEATS
"""A shape whose previous call took less than this (ms) is measured side by side as one case
of a process that holds every such shape of the same program (:func:`_paired_batches`);
a longer call keeps processes of its own (:func:`_paired_shape`)."""
BATCH_REPEATS, BATCH_MIN_TIME_MS = 3, 20.0
"""Each case of a batched pair's process, per build: the median of 3 timed repeats of at
least 20 ms of launches (a tuning trial's length, ``measure.tune_min_time_ms``), the builds'
repeats alternating: a pair's ratio carries the spread between processes, which more launches
within one process do not narrow, so a shape costs a pair about 2 x 60 ms, not 2 x 5 x
``measure.gemm_min_time_ms``, and the process's start (context, two program builds) is paid
once per pair for all of them."""


def _paired_batches(bench: _Bench, planned: list[tuple[str, GemmShape, str | None, dict]],
                    before: dict[tuple, dict[str, Any]], prev: dict[str, Any] | None
                    ) -> dict[tuple, Callable[[], dict[str, Any]]]:
    """The shapes of a side-by-side rerun that are measured in shared processes: every shape
    with a previous build (``before``) whose previous call was short
    (:data:`BATCH_MAX_CALL_MS`), grouped by program (the new and the previous spec without
    their cases). Returns ``{(kernel, M, N, K): thunk}``; a group is measured when the first
    of its thunks is called (in the sweep's order, under the device lock), each thunk then
    giving its shape's document as :func:`_paired_shape` does."""
    groups: dict[str, list[tuple[tuple, dict, dict]]] = {}
    for _source, g, _cls, spec in planned:
        key = (g.kernel, g.M, g.N, g.K)
        old = before.get(key)
        call_ms = _previous_call_ms(prev, key)
        if old is None or call_ms is None or call_ms >= BATCH_MAX_CALL_MS:
            continue
        program = json.dumps([{k: v for k, v in sp.items() if k not in ("cases", "repeats")}
                              for sp in (spec, old)], sort_keys=True)
        groups.setdefault(program, []).append((key, spec, old))
    out: dict[tuple, Callable[[], dict[str, Any]]] = {}
    for items in groups.values():
        done: dict[tuple, dict[str, Any]] = {}

        def get(key: tuple, items=items, done=done) -> dict[str, Any]:
            if not done:
                done.update(_paired_group(bench, items))
            return done[key]
        for key, _, _ in items:
            out[key] = lambda key=key, get=get: get(key)
    return out


def _paired_group(bench: _Bench, items: list[tuple[tuple, dict, dict]]
                  ) -> dict[tuple, dict[str, Any]]:
    """Shapes of one program measured side by side in shared processes: per pair one
    bench-gemm process holding every still undecided shape as a case, each case measured on
    both builds with alternating repeats (:func:`side_by_side`; :data:`BATCH_REPEATS` x
    :data:`BATCH_MIN_TIME_MS` per build); each shape's verdict from its own pairs
    (:func:`phonetrain.results.paired.many_until_decisive`, :data:`PAIRED_FIRST`,
    :data:`PAIRED_MAX`; the group's budget :data:`PAIRED_BUDGET_S` per shape). Returns
    ``{key: document}`` as :func:`_paired_shape`'s."""
    by_key = {key: (spec, old) for key, spec, old in items}
    timing = {"repeats": BATCH_REPEATS, "min_time_ms": BATCH_MIN_TIME_MS}
    procs: list[dict[str, Any]] = []
    cases: dict[tuple, list[dict[str, Any]]] = {key: [] for key in by_key}
    bad: dict[tuple, dict[str, Any]] = {}
    old_failed: set[tuple] = set()

    def pairs(k: int, active: list[tuple]) -> dict[tuple, Any]:
        spec, old = by_key[active[0]]
        doc = bench.spec(side_by_side(dict(spec, **timing), old, k, cases=[
            (by_key[key][0]["cases"][0], by_key[key][1]["cases"][0]) for key in active]))
        procs.append(doc)
        out: dict[tuple, Any] = {}
        for i, key in enumerate(active):
            new, prev = _sides(doc, i)
            if new.get("status") != "ok":
                bad[key] = _new_build(doc, None if doc.get("status") == "skipped" else new)
                out[key] = None
                continue
            cases[key].append(new)
            if prev.get("status") != "ok":
                old_failed.add(key)
            out[key] = (prev.get("median_ms") if prev.get("status") == "ok" else None,
                        new.get("median_ms"))
        return out

    verdicts = many_until_decisive(pairs, list(by_key), first=PAIRED_FIRST,
                                   max_pairs=PAIRED_MAX,
                                   budget_s=PAIRED_BUDGET_S * len(by_key))
    out = {}
    for key, verdict in verdicts.items():
        if key in bad:
            out[key] = bad[key]
            continue
        if key in old_failed:
            verdict = verdict | {"verdict": "cannot tell", "reason": PREVIOUS_FAILED}
        out[key] = _paired_doc(procs[0], cases[key], verdict, timing)
    return out


def _paired_doc(first_doc: dict[str, Any], cases: list[dict[str, Any]],
                verdict: dict[str, Any], timing: dict[str, Any]) -> dict[str, Any]:
    """A side-by-side shape's ``gemm.json`` document: its case's figures over the new build's
    processes (``median_ms``: the median of their medians, ``low_ms``..``high_ms``: the lowest
    and highest) and ``paired`` (``verdict`` with the per-process ``timing``)."""
    ms = sorted(c["median_ms"] for c in cases)
    mid = ms[len(ms) // 2] if len(ms) % 2 else (ms[len(ms) // 2 - 1] + ms[len(ms) // 2]) / 2
    one = dict(cases[0], median_ms=mid, low_ms=ms[0], high_ms=ms[-1],
               gflops=cases[0]["gflops"] * cases[0]["median_ms"] / mid,
               max_err=max(c.get("max_err") or 0.0 for c in cases))
    verdict = verdict | timing
    print(f"phonetrain: GEMM {one['kernel']} {one['M']}x{one['N']}x{one['K']}, side by side: "
          f"{verdict['verdict']} ({verdict['reason']}; {verdict['pairs']} pairs of at most "
          f"{PAIRED_MAX}, {verdict['elapsed_s']:.0f} s of {verdict['budget_s']:.0f} s)",
          file=sys.stderr)
    return dict(_new_build(first_doc, one), paired=verdict)


def _identical(job: Job, doc_out: dict[str, Any], prev: dict[str, Any], why: str) -> dict:
    """An identical build of the version (:func:`phonetrain.stages.paired.identical_gemm`):
    the previous sweep's rows are this one's, each saying ``no change (identical build)``;
    nothing is measured."""
    mark = {"verdict": "no change", "reason": f"identical build: {why}",
            "identical_build": True, "pairs": 0, "device": doc_out["device"],
            "previous_kernel_hash": prev.get("kernel_hash")}
    doc_out.update({k: prev[k] for k in ("status", "reason", "device_info") if k in prev})
    doc_out["rows"] = [dict(r, paired=mark) for r in prev.get("rows", [])]
    doc_out["kernel_hash"] = job.spec(GemmSpec).kernel_hash
    doc_out[STAMP] = stamp(job)
    write_json(doc_out, job.output.gemm)
    print(f"phonetrain: GEMM sweep {doc_out['device']}/{doc_out['version']}: no change "
          f"(identical build: {why}); not re-measured", file=sys.stderr)
    return doc_out


def peaks(job: Job) -> dict:
    """The device's peak compute and read bandwidth (runner bench-peak) -> ``output.peaks``."""
    p = job.spec(DeviceSpec)
    bench = _Bench(job, p, None)
    with bench.r.lock():
        try:
            doc = bench.r.bench_peak(bench.out(), min_time_ms=50)
        except RunnerError as e:
            raise StageError(f"device '{bench.r.device}': runner bench-peak: {e}") from None
    doc["device_id"] = p.device
    doc[STAMP] = stamp(job)
    write_json(doc, job.output.peaks)
    return doc


# ---------------------------------------------------------------- on this host, without a job

def bench_here(binary: str | Path, version: KernelVersion | None, shapes: list[GemmShape], *,
               selector: DeviceSelector | None = None, min_time_ms: float = 100,
               repeats: int = 5, threads: int = 0, timeout_s: float = 600) -> pd.DataFrame:
    """GFLOPS of ``version``'s GEMM kernels (``None``: the runner's CPU backend) on this host's
    runner ``binary`` for ``shapes`` (columns: :func:`phonetrain.results.readers.gemm_frame`;
    ``attrs["skipped"]`` holds the reason when the device lacks the version's library).
    Raises a :class:`~phonetrain.runner.RunnerError` when the runner fails (e.g. a kernel that
    does not compile)."""
    from phonetrain.results.readers import gemm_frame  # pandas: not in the stage jobs

    opencl = version is not None
    with tempfile.TemporaryDirectory(prefix="phonetrain-gemm-") as tmp:
        source = ""
        if opencl and not version.gemm_library:   # assembled as the workflow stages it
            source = str(stage_kernels(version.name, Path(tmp)) / gemm_source(version).name)
        spec = gemm_spec(version, shapes, source=source, backend="opencl" if opencl else "cpu",
                         min_time_ms=min_time_ms, repeats=repeats, threads=threads)
        r = Runner.local_binary(binary, tmp, selector, timeout_s=timeout_s)
        doc = r.bench_gemm(spec, Path(tmp) / "out")
    return gemm_frame(doc, version.name if opencl else CPU_VERSION)


def peaks_here(binary: str | Path, selector: DeviceSelector | None = None, *,
               min_time_ms: float = 50, work_items: int = 0,
               timeout_s: float = 600) -> pd.DataFrame:
    """Peak compute (GFLOPS per vector width) and read bandwidth (GB/s) of this host's OpenCL
    device: the roofline's two ceilings (columns: :func:`phonetrain.results.readers.peaks_frame`).
    ``work_items`` > 0 shrinks the compute launches (tests)."""
    from phonetrain.results.readers import peaks_frame  # pandas: not in the stage jobs

    with tempfile.TemporaryDirectory(prefix="phonetrain-peak-") as tmp:
        r = Runner.local_binary(binary, tmp, selector, timeout_s=timeout_s)
        return peaks_frame(r.bench_peak(Path(tmp) / "out", min_time_ms=min_time_ms,
                                        work_items=work_items))


STAGES = {"gemm-shapes": write_shapes, "tune-version": tune_version, "gemm": gemm,
          "peaks": peaks}

if __name__ == "__main__":
    sys.exit(main(STAGES, sys.argv[1:]))
