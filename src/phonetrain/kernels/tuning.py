"""Per-device tuning of the optimized GEMM versions (tile sizes, work per item, local sizes).

Tuning results are kept per shape class, one file per class, so a study that grows (more
models, more batch sizes) adds class files and leaves every existing one -- and the runs that
use it -- untouched. A class is derived from the GEMM call alone (:func:`gemm_class`): the
kernel and its exact ``M x N x K``, e.g. ``gemm_nt_32x256x784``. The tuner's choice depends
on all three sizes (how many ``TSM x TSN`` tiles or ``RM x RN`` register blocks cover C, the
partial edge tiles, the ``TSK``/``VK`` steps of the K loop), and the models' calls are few
(2 to 23 per model, most distinct even after rounding to powers of two), so a class is one
call: it is tuned on exactly that call, and its correctness check covers that call's edges.
The earlier classes by FLOPs (small/medium/large) were tuned on whichever of the sweep's
shapes fell into them, so adding a model changed the choice of every run.

The tune job of a device x version runs every candidate of the version's tuning
space (:attr:`phonetrain.kernels.versions.KernelVersion.candidates`: the ``version.yaml``
defaults, then its ``tuning.candidates``) on each class's call (:func:`class_shape`) through
the runner's ``bench-gemm`` mode -- one process per candidate for all the classes it tunes
(:mod:`phonetrain.kernels.trials`) -- and keeps, among the candidates that passed the
correctness check (a candidate that does not compile, fails to launch or computes a wrong
result is never picked), the earliest in the space's order whose GFLOPS are within
:data:`TIE_MARGIN` of the highest: a near tie is decided by the order, not by the host's
noise. With ``measure.tune_finalists`` a short screening pass of every candidate comes
first, and only each class's finalists are timed in full (:func:`tune`). The result is
``results/build/<device>/kernels/<version>/tuning/<class>.json``::

    {"version": "regblock", "device": "host", "kernel_hash": "...",
     "classes": {"gemm_nt_32x256x784": {"defines": {...}, "local": [4, 4] | null,
                                        "gflops_geomean": 12.3,
                                        "shapes": [["gemm_nt", 32, 256, 784]]}},
     "default": "gemm_nt_32x256x784",
     "trials": [{"defines", "local", "status": "ok" | "error: ...", "cases": [...]}]}

A device lacking what the version needs (CLBlast, image support: bench-gemm says "skipped")
gives ``{"classes": {}, "default": null, "skipped": reason}``, which runs leave untouched
(the run itself then stops with the runner's missing-library exit code and that reason).

The square sizes of the GEMM sweep are classes of their own (``square<n>``,
:func:`square_class`), all in one file per device x version, ``tuning/squares.json``
(:data:`SQUARES`): a square is tuned on exactly that shape when one launch of it is expected
to take at most ``tune_max_launch_s`` (:func:`tunable_squares`: extrapolated from the fastest
square measured before it); a larger square runs with the largest tuned square class below it
(:func:`class_for`). Only the GEMM sweep reads it; no run does.

Every file is a tuning document of its own; :func:`load_tunings` merges the files a job was
given into one (:func:`merge_tunings`). Runs use it through :func:`tune_plan`: one program
per plan, so the plan takes the class that holds the largest share of its GEMM FLOPs
(:func:`plan_class`), and its GEMM steps get that configuration's defines (program build
options) and launch geometry. A run's deploy is given the class files of its own plan's calls
(:func:`plan_classes`) and nothing else. Only numpy/pandas and PyYAML are needed (no Hydra), so
benchmarks/bench_gemm.py can use the same spaces.

Convolutions: an optional ``conv`` section records, per conv forward shape
(:func:`conv_key`), whether im2col + GEMM or the direct ``conv2d_fwd`` kernel was faster on the
device (:func:`choose_conv`; measured by ``benchmarks/bench_conv.py --tuning``)::

    "conv": {"b32_c1_h28_w28_oc6_k5_s1_p2": {"lowering": "direct", "im2col_ms": 0.9,
                                             "direct_ms": 0.4}, ...}

and the lowering reads it back through :func:`conv_lowerings`.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any, Callable

from ..errors import PhonetrainError, ResultsFileError
from ..io import write_text
from .abi import GEMM_KERNELS
from . import trials as trials_mod
from .gemm import GemmShape
from .launch import geometry
from .spirv import spec_options
from .versions import (GEMM_LIBRARIES, KernelVersion, constraint_names, eval_constraint,
                       load_version, parse_constraint)

SQUARES = "squares"
"""The file name (without ``.json``) of a device x version's square classes."""
_CLASS_RE = re.compile(r"^(gemm_(?:nn|nt|tn))_([1-9][0-9]*)x([1-9][0-9]*)x([1-9][0-9]*)$")
CLASS_PATTERN = r"gemm_(?:nn|nt|tn)_[1-9][0-9]*x[1-9][0-9]*x[1-9][0-9]*"
"""A model class name as a regular expression (a Snakemake wildcard constraint)."""


TIE_MARGIN = 0.05
"""Candidates within this fraction of the best geomean GFLOPS tie, and the earliest in the
space's order (the version's defaults first) wins. Without it the noise of one tuning job
picked the choice: two tunings of identical sources on a 2-core VM gave top candidates 1.02
vs 1.01 and 0.37 vs 0.37 GFLOPS for LeNet-5's tiled classes, and chose 16x16 tiles in one
study and 128x128 in the other for its plan (a training step of 66 vs 99 ms)."""


class TuningError(PhonetrainError):
    """No candidate of a class passed the correctness check; the message names the version."""


def gemm_class(g: GemmShape) -> str:
    """The tuning class of one GEMM call: its kernel and sizes, ``<kernel>_<M>x<N>x<K>``
    (e.g. ``gemm_nt_32x256x784``; module docstring). Raises ``ValueError`` for a kernel not in
    :data:`~phonetrain.kernels.abi.GEMM_KERNELS` or a size < 1."""
    if g.kernel not in GEMM_KERNELS or min(g.M, g.N, g.K) < 1:
        raise ValueError(f"not a GEMM call: {g}")
    return f"{g.kernel}_{int(g.M)}x{int(g.N)}x{int(g.K)}"


def class_shape(cls: str) -> GemmShape:
    """The GEMM call a model class (:func:`gemm_class`) is tuned on; ``ValueError`` for a
    name that is not one."""
    m = _CLASS_RE.match(cls)
    if not m:
        raise ValueError(f"{cls!r} is not a GEMM tuning class (<kernel>_<M>x<N>x<K>, "
                         f"kernel one of {', '.join(GEMM_KERNELS)})")
    return GemmShape(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)))


def square_class(n: int) -> str:
    """The tuning class of the GEMM sweep's square size ``n`` (M = N = K = n)."""
    return f"square{int(n)}"


def class_for(g: GemmShape, source: str, tuned: dict[str, Any]) -> str | None:
    """The tuned class a GEMM of the study runs with: a model's call its own class
    (:func:`gemm_class`), a square of the sweep (``source`` ``square``) its own class, else
    the largest tuned square class below it; failing those the tuning's default. None when
    nothing was tuned."""
    classes = tuned.get("classes") or {}
    if not classes:
        return None
    if source == "square":
        own = square_class(g.M)
        if own in classes:
            return own
        below = [int(c[6:]) for c in classes if c.startswith("square") and c[6:].isdigit()
                 and int(c[6:]) < g.M]
        if below:
            return square_class(max(below))
    else:
        cls = gemm_class(g)
        if cls in classes:
            return cls
    return tuned.get("default")


def tunable_squares(sizes: list[int], measure: Callable[[int], float | None],
                    max_launch_s: float) -> list[int]:
    """The square sizes to tune, ascending: each measured with ``measure(n) -> GFLOPS`` (the
    version's defaults; None when it failed), as long as one launch of it is expected to take
    at most ``max_launch_s`` at the best GFLOPS measured so far (the first always)."""
    chosen: list[int] = []
    best = 0.0
    for n in sorted(set(int(x) for x in sizes)):
        if chosen and (best <= 0 or 2.0 * n ** 3 / (best * 1e9) > max_launch_s):
            break
        g = measure(n)
        if g is None or not g > 0:
            break
        chosen.append(n)
        best = max(best, g)
    return chosen


def candidate_version(version: KernelVersion, cand: dict[str, Any]) -> KernelVersion:
    """A copy of ``version`` with the candidate's defines and (if any) local size applied to
    every GEMM kernel."""
    v = copy.deepcopy(version)
    v.defines.update(cand.get("defines") or {})
    if cand.get("local"):
        v.local_sizes.update({k: list(cand["local"]) for k in GEMM_KERNELS})
    return v


def class_misfit(version: KernelVersion, cand: dict[str, Any], backend: str) -> str | None:
    """Why a tuned class's configuration (``{"defines": ..., "local": ...}``) cannot build the
    version on ``backend``, or None: the ``tuning.constraints`` of its ``version.yaml`` it
    breaks (OpenCL), or what :func:`~phonetrain.kernels.spirv.shader_candidate` rejects
    (Vulkan: ``vk/tuning.yaml``). A tuning file edited by hand, or written by other sources,
    is caught here rather than by the compiler or the launch geometry."""
    if backend == "vulkan":
        from .spirv import ShaderError, shader_candidate
        try:
            shader_candidate(version.name, cand.get("defines") or {}, version.root)
        except ShaderError as e:
            return e.message
        return None
    names = constraint_names(version, cand)
    broken = []
    for text in version.constraints:
        try:
            if not eval_constraint(parse_constraint(text), names):
                broken.append(text)
        except (NameError, ArithmeticError, TypeError):
            broken.append(text)
    return f"{cand} breaks {broken} of the version's tuning.constraints" if broken else None


def tunable(version: KernelVersion | str) -> bool:
    """True when the version (a :class:`KernelVersion` or a version name, loaded with
    :func:`~phonetrain.kernels.versions.load_version`) has candidates besides its defaults."""
    if isinstance(version, str):
        version = load_version(version)
    return len(version.candidates) > 1


def tune(version: KernelVersion, shapes: list[GemmShape],
         run_spec: Callable[[dict[str, Any]], dict[str, Any]], *, source: str,
         min_time_ms: float = 20, repeats: int = 3,
         defaults_only: bool = False, squares: list[int] = (), finalists: int = 0,
         screen_min_time_ms: float = 5.0, backend: str = "opencl",
         space: list[dict[str, Any]] | None = None, together: bool = False
         ) -> dict[str, Any]:
    """Run every candidate of ``space`` (default ``version.candidates``; only the first, the
    defaults, with ``defaults_only``; it is still checked) on ``shapes`` (GEMM calls, each its
    own class, :func:`gemm_class`) and the square sizes ``squares`` (each its own class,
    :func:`square_class`); return the tuning document (module docstring). The default class
    is the models' class with the most FLOPs (None when there is no class). Each candidate
    runs every call in one process (:func:`phonetrain.kernels.trials.run_cases`); with
    ``together`` (``run_spec`` being the runner's, which builds a case's own options) on
    OpenCL the candidates of a pass share one process
    (:func:`phonetrain.kernels.trials.run_candidates`).

    ``finalists`` > 0 (and more candidates than ``finalists`` + 1): two passes. The first
    runs every candidate on every call with one repeat of ``screen_min_time_ms`` (checked as
    always); then each class's finalists (:func:`phonetrain.kernels.trials.finalists`: its
    ``finalists`` fastest, and the defaults) run again at ``min_time_ms`` x ``repeats``, and
    the class's choice is among them, on those figures (a case's ``pass`` says which pass
    gave it). 0: one pass, every candidate at ``min_time_ms`` x ``repeats``.

    ``run_spec(spec) -> gemm.json document`` executes one bench-gemm spec on the device (and
    raises a :class:`~phonetrain.errors.PhonetrainError` when the runner fails, e.g. a build
    error); ``source`` is the version's ``gemm.cl`` path as the runner sees it (``backend``
    ``"vulkan"``: its SPIR-V folder, the spec of :func:`~phonetrain.kernels.gemm.gemm_spec`
    for :mod:`~phonetrain.kernels.vk_gemm`, and ``space`` the shaders' candidates,
    :func:`~phonetrain.kernels.spirv.shader_candidates`). Raises :class:`TuningError` when
    some class has no correct candidate.
    """
    space = version.candidates if space is None else space
    if defaults_only:
        space = space[:1]
    labelled = [(gemm_class(g), g) for g in shapes] + \
        [(square_class(n), GemmShape("gemm_nn", n, n, n)) for n in squares]
    every = [g for _, g in labelled]
    groups = {cls: [i for i, (c, _) in enumerate(labelled) if c == cls]
              for cls in dict.fromkeys(c for c, _ in labelled)}
    two = finalists > 0 and len(space) > finalists + 1
    versions = [candidate_version(version, cand) for cand in space]
    timing = {"source": source, "backend": backend,
              "min_time_ms": screen_min_time_ms if two else min_time_ms,
              "repeats": 1 if two else repeats}
    trials = []
    try:
        ran = trials_mod.run_candidates(versions, [every] * len(versions), run_spec,
                                        together=together, **timing)
        for cand, (status, cases) in zip(space, ran):
            trials.append({"defines": cand.get("defines") or {}, "local": cand.get("local"),
                           "status": status,
                           "cases": [c if c is None or not two else dict(c, **{"pass": 1})
                                     for c in cases]})
        finals = {cls: trials_mod.finalists(trials, idx, finalists) for cls, idx in
                  groups.items()} if two else {}
        if two:
            trials_mod.second_pass(versions, trials, every, finals, groups, run_spec,
                                   source=source, backend=backend, min_time_ms=min_time_ms,
                                   repeats=repeats, together=together)
    except trials_mod.Skipped as e:   # the device lacks what the version needs
        return {"version": version.name, "classes": {}, "default": None,
                "skipped": e.reason, "trials": []}
    classes = {cls: _choose(version, trials, idx, [every[i] for i in idx], cls,
                            finals.get(cls) if two else None)
               for cls, idx in groups.items()}
    return {"version": version.name, "classes": classes, "default": _default(classes),
            "trials": trials}


def _choose(version: KernelVersion, trials: list[dict[str, Any]], idx: list[int],
            members: list[GemmShape], cls: str, finals: list[int] | None) -> dict[str, Any]:
    """One class's choice: among the candidates that passed every case ``idx`` of the class
    (with ``finals``: only those finalists, on their second pass), the earliest in the
    space's order within :data:`TIE_MARGIN` of the best geomean GFLOPS. Raises
    :class:`TuningError` when none passed."""
    allowed = range(len(trials)) if finals is None else finals
    scored = [(trials[i], s) for i in allowed
              if (s := trials_mod.class_score(trials[i], idx,
                                              None if finals is None else 2)) is not None]
    top = max((score for _, score in scored), default=0.0)
    best, best_score = next(((t, score) for t, score in scored
                             if score > 0 and score >= top * (1 - TIE_MARGIN)), (None, 0.0))
    if best is None:
        raise TuningError(f"kernel version {version.name}: no candidate passed the "
                          f"correctness check on the {cls} shapes: "
                          f"{_trial_failures(trials, idx)}")
    return {"defines": best["defines"], "local": best["local"], "gflops_geomean": best_score,
            "shapes": [[g.kernel, g.M, g.N, g.K] for g in members]}


def class_doc(doc: dict[str, Any], cls: str, labels: list[str]) -> dict[str, Any]:
    """The tuning document of one class out of a document :func:`tune` made for several
    (``labels``: the class of each call :func:`tune` was given, in its order): that class,
    its default (itself) and each trial with only that class's cases; a skipped document
    without classes."""
    if doc.get("skipped") is not None or cls not in doc["classes"]:
        return dict(doc, classes={}, default=None, trials=[])
    idx = [i for i, c in enumerate(labels) if c == cls]
    trials = [dict(t, cases=[t["cases"][i] for i in idx if i < len(t["cases"])])
              if t["status"] == "ok" else dict(t) for t in doc["trials"]]
    return dict(doc, classes={cls: doc["classes"][cls]}, default=cls, trials=trials)


def _trial_failures(trials: list[dict[str, Any]], idx: list[int], most: int = 3) -> str:
    """Why the ``trials`` failed on the cases ``idx`` of one class: the distinct reasons
    (a candidate's error, e.g. its compiler message, or a case's status and error), each
    with how many candidates gave it, the ``most`` commonest first."""
    reasons: dict[str, int] = {}
    for t in trials:
        if t["status"] != "ok":
            why = t["status"]
        else:
            bad = [t["cases"][i] for i in idx if i < len(t["cases"])
                   and t["cases"][i] is not None and t["cases"][i]["status"] != "ok"]
            why = (f"{bad[0]['kernel']} {bad[0]['M']}x{bad[0]['N']}x{bad[0]['K']}: "
                   f"{bad[0]['status']} {bad[0].get('error') or ''}".strip()
                   if bad else "no result for this class")
        reasons[why] = reasons.get(why, 0) + 1
    top = sorted(reasons.items(), key=lambda kv: -kv[1])[:most]
    return "; ".join(f"{n} of {len(trials)} candidate(s): {why}" for why, n in top) or \
        "no candidate was tried"


def _default(classes: dict[str, Any]) -> str | None:
    """The models' class with the most GEMM FLOPs (a square class when there is none)."""
    models = [c for c in classes if not c.startswith("square")] or list(classes)
    if not models:
        return None
    return max(models, key=lambda c: sum(GemmShape(*s).flops
                                         for s in classes[c].get("shapes") or []))


def write_tuning(doc: dict[str, Any], path: str | Path) -> None:
    """Write the tuning document atomically (temp file + rename)."""
    write_text(path, json.dumps(doc, indent=1))


def load_tuning(path: str | Path) -> dict[str, Any]:
    """Read one tuning file; :class:`~phonetrain.errors.ResultsFileError` naming the file and
    what is wrong when it is not one (:func:`tuning_problem`)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ResultsFileError(f"{path}: not a tuning document ({e})",
                               "rerun the tune job") from e
    problem = tuning_problem(doc)
    if problem:
        raise ResultsFileError(f"{path}: not a tuning document ({problem})",
                               "rerun the tune job")
    return doc


def tuning_problem(doc: Any) -> str | None:
    """What keeps ``doc`` from being a tuning document, or None: an object with ``classes``
    (class name -> an object whose ``defines`` maps names to integers and whose optional
    ``local`` is null or ``[LX, LY]``), ``default`` (null, or one of the classes) and an
    optional ``conv`` object."""
    if not isinstance(doc, dict):
        return f"a JSON {type(doc).__name__}, not an object"
    missing = [k for k in ("classes", "default") if k not in doc]
    if missing:
        return f"no key '{missing[0]}'"
    if not isinstance(doc["classes"], dict):
        return "'classes' is not an object"
    for name, c in doc["classes"].items():
        if not isinstance(c, dict) or not isinstance(c.get("defines"), dict):
            return f"class '{name}' has no 'defines' object"
        bad = {k: v for k, v in c["defines"].items() if type(v) is not int}
        if bad:
            return f"class '{name}' has defines that are not integers: {bad}"
        local = c.get("local")
        if local is not None and not (isinstance(local, list) and len(local) == 2 and
                                      all(type(x) is int and x >= 1 for x in local)):
            return f"class '{name}' has local {local!r}, not null or [LX, LY] (positive ints)"
    default = doc["default"]
    if default is not None and (not isinstance(default, str) or default not in doc["classes"]):
        return f"default {default!r} is not one of its classes"
    if "conv" in doc and doc["conv"] is not None and not isinstance(doc["conv"], dict):
        return "'conv' is not an object"
    return None


def merge_tunings(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """One tuning document from per-class ones (module docstring): the union of their
    classes (with their trials), default :func:`_default`. Any skipped document makes the
    whole skipped (the device lacks what the version needs); no documents give
    ``{"classes": {}, "default": None}``. The trials stay in the per-class files."""
    for d in docs:
        if d.get("skipped") is not None:
            return {**d, "classes": {}, "default": None}
    classes: dict[str, Any] = {}
    for d in docs:
        classes.update(d["classes"])
    out = {k: docs[0][k] for k in ("version", "device", "kernel_hash") if docs and k in docs[0]}
    return {**out, "classes": classes, "default": _default(classes)}


def load_tunings(paths: list[str | Path]) -> dict[str, Any]:
    """Read and merge per-class tuning files (:func:`load_tuning`, :func:`merge_tunings`)."""
    return merge_tunings([load_tuning(p) for p in paths])


def tuning_files(folder: str | Path) -> list[Path]:
    """The tuning files of a ``tuning/`` folder (``results/build/<device>/kernels/<version>/
    tuning``), sorted by name; [] when it does not exist."""
    folder = Path(folder)
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def _plan_gemms(plan) -> list[GemmShape]:
    return [GemmShape(s.name, *(int(a["i"]) for a in s.args[:3])) for s in plan.steps
            if s.op == "kernel" and s.name in GEMM_KERNELS]


def plan_classes(plan) -> list[str]:
    """The model classes of a plan's GEMM calls (:func:`gemm_class`), in first-use order: the
    tuning files its deploy needs."""
    return list(dict.fromkeys(gemm_class(g) for g in _plan_gemms(plan)))


def plan_class(plan, tuning: dict[str, Any]) -> str:
    """The tuned class holding the largest share of the plan's GEMM FLOPs (the tuning's
    default class when the plan has no GEMM or none of its classes was tuned)."""
    flops: dict[str, int] = {}
    for g in _plan_gemms(plan):
        flops[gemm_class(g)] = flops.get(gemm_class(g), 0) + g.flops
    tuned = {c: f for c, f in flops.items() if c in tuning["classes"]}
    return max(tuned, key=tuned.get) if tuned else tuning["default"]


def tune_plan(plan, version: KernelVersion, tuning: dict[str, Any]):
    """A copy of ``plan`` using the tuned configuration of :func:`plan_class`: every
    program's build options (a Vulkan plan's: the specialization constants,
    :func:`~phonetrain.kernels.spirv.spec_options`) and every GEMM step's global/local size.
    Returns (plan, class);
    a skipped tuning (no classes), or one without any class of the plan and no default,
    returns an unchanged copy and class None."""
    if not tuning["classes"]:   # skipped on this device (module docstring)
        return copy.deepcopy(plan), None
    cls = plan_class(plan, tuning)
    if cls is None:
        return copy.deepcopy(plan), None
    v = candidate_version(version, tuning["classes"][cls])
    out = copy.deepcopy(plan)
    for p in out.programs:
        if out.backend == "vulkan":   # the shaders' specialization constants only
            p.options = spec_options(v)
        elif p.source not in GEMM_LIBRARIES:   # a library's reserved source takes no options
            p.options = v.options
    for s in out.steps:
        if s.op == "kernel" and s.name in GEMM_KERNELS:
            m, n, k = (int(a["i"]) for a in s.args[:3])
            s.global_size, s.local_size = geometry(s.name, {"M": m, "N": n, "K": k}, v)
    return out, cls


# ---------------------------------------------------------------- convolution lowering

CONV_LOWERINGS = ("im2col", "direct")
"""How a Conv2d forward is lowered: ``im2col`` (im2col + the version's GEMM + swap01, the
default) or ``direct`` (the ``conv2d_fwd`` kernel); ``src/kernels/README.md``."""


def conv_key(batch: int, c: int, h: int, w: int, oc: int, k: int, stride: int, pad: int) -> str:
    """The ``conv`` section's key of one conv forward shape, e.g. ``b32_c1_h28_w28_oc6_k5_s1_p2``
    (input ``[batch, c, h, w]``, ``oc`` output channels, ``k x k`` kernel)."""
    return f"b{batch}_c{c}_h{h}_w{w}_oc{oc}_k{k}_s{stride}_p{pad}"


def choose_conv(times_ms: dict[str, dict[str, float | None]]) -> dict[str, Any]:
    """The ``conv`` section of tuning.json from measured forward times: ``times_ms[key]`` maps
    each lowering of :data:`CONV_LOWERINGS` to its median ms per forward (None: it failed).
    Per key: ``{"lowering": <the faster one that ran>, "im2col_ms": ..., "direct_ms": ...}``;
    a tie or a failed direct keeps ``im2col``. Raises ``ValueError`` when im2col failed."""
    out = {}
    for key, t in times_ms.items():
        if t.get("im2col") is None:
            raise ValueError(f"conv {key}: the im2col lowering failed; it is the reference")
        direct = t.get("direct")
        pick = "direct" if direct is not None and direct < t["im2col"] else "im2col"
        out[key] = {"lowering": pick, "im2col_ms": t["im2col"], "direct_ms": direct}
    return out


def conv_lowerings(tuning: dict[str, Any] | None, where: str = "tuning.json") -> dict[str, str]:
    """``{conv_key: lowering}`` from a tuning document's optional ``conv`` section (empty for
    None or a document without one); the lowering (:func:`phonetrain.lowering.lower`) lowers
    the listed shapes that way and any other shape with im2col. Raises
    :class:`~phonetrain.errors.ResultsFileError` naming ``where`` and the key for an entry
    that is not ``{"lowering": one of CONV_LOWERINGS}``."""
    section = (tuning or {}).get("conv") or {}
    out = {}
    for key, entry in section.items():
        lowering = entry.get("lowering") if isinstance(entry, dict) else None
        if lowering not in CONV_LOWERINGS:
            raise ResultsFileError(f"{where}: conv.{key}.lowering is {lowering!r}; expected one "
                                   f"of {', '.join(CONV_LOWERINGS)}", "rerun the tune job")
        out[key] = lowering
    return out
