"""Every path of the results folder, and of a device's staging root, in one place.

The workflow's rules build their file patterns from :class:`Layout` (wildcards such as
``"{device}"`` pass through unchanged), ``phonetrain run`` and the hand-run ``aggregate`` /
``report`` commands take the same paths from it, and stages receive their files by name.
Paths are strings (Snakemake patterns), joined with ``/``.

Results folder (``results_dir``, default ``results/``)::

    build/<device>/runner                       the runner built for the device
    build/<device>/kernels/<version>/           build.json, params.json, failed.json,
                                                tuning/<class>.json (one per GEMM tuning
                                                class), tuning/squares.json
    build/<device>/spirv/<version>/tuning/      the Vulkan tune job's <class>.json and
                                                squares.json (the version's shaders)
    build/.runner-cache/                        compiled runners keyed by sources and flags
    data/<dataset dir>/b<batch>/                images.f32, labels.i32
    plans/<experiment>/                         plan.json (device-independent), tensors/*.f32
    deploy/<device>/<experiment>.json           what deploy put on the device
    runs/<device>/<experiment>/                 params.json, plan.json (the plan that ran),
                                                run.json, trace.csv, dumps/, checkpoints/,
                                                verify.json, measurement.json, eval.json,
                                                repeat_<k>/, events/ (the process that
                                                recorded per-command events, when apart),
                                                failed.json, trace.perfetto.json, ran/
                                                (what it ran), paired.json and previous/
                                                (a rerun measured beside the previous build)
    gemm/<device>/<version>.json, peaks/<device>.json
    bandwidth/<device>/bandwidth.csv (+ bench.json)
    summary/<table>.parquet, summary/COMPLETE
    history/measurements.parquet                every measurement aggregated (the ledger the
                                                history table is copied from; no rule output)
    report/report.html, report.md, figures/<name>.<ext>, report/COMPLETE
    logs/<stage>/<...>.log
    stage/<device>/                             staging root of a ``local`` device
    oneoff/                                     what one-off runs (``phonetrain run``) make
    owner.lock, owner.json                      the lock of the workflow writing here and
                                                its holder (phonetrain.results.owner)
    <output>: inputs / inputs.json / <file>.inputs.json
                                                the settings an output was made with (a JSON
                                                document's key, a folder's file, a file's
                                                companion: phonetrain.stages.stamp)
    quarantine/<UTC time>/<path>                outputs the check moved aside (+ <path>.why.json)
                                                for themselves: build/, data/, plans/, deploy/,
                                                logs/ as above (their run folders are runs/)

A device's staging root (a local folder, or ``/data/local/tmp/phonetrain`` on a phone) holds
``runner``, ``kernels/<version>/``, ``data/...`` and ``plans/<experiment>/`` as above (the
results folder mirrors it for data and plans, so plan paths resolve under either), ``specs/``
(benchmark specs) and ``out/<name>/`` (what one runner invocation writes).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# Files of a run folder (runs/<device>/<experiment>/).
PARAMS = "params.json"
PLAN = "plan.json"
RUN = "run.json"
TRACE = "trace.csv"
VERIFY = "verify.json"
FAILED = "failed.json"
PERFETTO = "trace.perfetto.json"
DEVICE_READINGS = "device.json"
MEASUREMENT = "measurement.json"  # the measurement verdict (interval, conditions, unstable)
SCHEDULE = "schedule.json"  # how the workflow scheduled the measurement (stages.schedule)
EVAL = "eval.json"  # held-out loss and accuracy at the evaluation iterations (eval_every > 0)
# the runner process that recorded an event per command for the breakdown, where the step
# time came from processes without them (measure.events_apart): its run.json, trace.csv
EVENTS = "events"
# what a run ran (kernel sources, plan, build key: phonetrain.stages.paired), the side-by-side
# verdict of a rerun against the previous build, and the previous build's processes
RAN = "ran"
PAIRED = "paired.json"
PREVIOUS = "previous"
CHECKPOINTS = "checkpoints"     # checkpoints/<iteration>/<tensor>.f32 (per-step verification)
DUMPS = "dumps"
COMPLETE = "COMPLETE"
QUARANTINE_NOTE = ".why.json"  # suffix of the note beside an output moved into quarantine/

# Paths inside a device's staging root (relative; the same on every device).
DEVICE_RUNNER = "runner"


def device_kernels(version: str) -> str:
    """A kernel version's resolved sources on a device: ``kernels/<version>``."""
    return f"kernels/{version}"


def device_spirv(version: str) -> str:
    """A kernel version's compiled Vulkan shaders on a device: ``spirv/<version>``
    (``<kernel>.spv`` each)."""
    return f"spirv/{version}"


def plan_dir_rel(plan_id: str) -> str:
    """A plan folder relative to a staging root or the results folder: ``plans/<id>``."""
    return f"plans/{plan_id}"


def batch_dir_rel(dataset_dir: str, batch_size: int) -> str:
    """A dataset's batch folder relative to a staging root: ``data/<dataset dir>/b<batch>``."""
    return f"data/{dataset_dir}/b{batch_size}"


def device_out(name: str) -> str:
    """Output folder of one runner invocation on a device: ``out/<name>``."""
    return f"out/{name}"


def device_spec(name: str) -> str:
    """A benchmark spec pushed to a device: ``specs/<name>``."""
    return f"specs/{name}"


def repeat_dir(run_dir: str, repeat: int) -> str:
    """Folder of repeat ``repeat`` (>= 1) of a run; repeat 0 is the run folder itself."""
    return run_dir if repeat == 0 else f"{run_dir}/repeat_{repeat}"


RUNNER_CACHE_REL = "build/.runner-cache"  # the runner compile cache, in the results folder


def stage_root_rel(device: str) -> str:
    """Staging root of a ``local`` device relative to the results folder (``stage/<d>``)."""
    return f"stage/{device}"


def gemm_shapes_rel() -> str:
    """The GEMM study's shape list relative to the results folder."""
    return "build/gemm_shapes.json"


@dataclass(frozen=True)
class Layout:
    """The results folder ``root`` (as given: relative paths stay relative)."""

    root: str

    def _p(self, *parts: str) -> str:
        return "/".join((str(self.root).rstrip("/"),) + parts)

    # build stage
    def runner(self, device: str) -> str:
        return self._p("build", device, "runner")

    def runner_cache(self) -> str:
        return self._p(RUNNER_CACHE_REL)

    def gemm_shapes(self) -> str:
        """The models' GEMM shapes of the study (``gemm_shapes`` job), read by tune and gemm."""
        return self._p(gemm_shapes_rel())

    def kernel_dir(self, device: str, kernel: str) -> str:
        return self._p("build", device, "kernels", kernel)

    def kernel_build(self, device: str, kernel: str) -> str:
        return f"{self.kernel_dir(device, kernel)}/build.json"

    def kernel_failed(self, device: str, kernel: str) -> str:
        """Written instead of build.json when the version does not compile on the device."""
        return f"{self.kernel_dir(device, kernel)}/{FAILED}"

    def tuning_dir(self, device: str, kernel: str) -> str:
        """One file per tuning class (:mod:`phonetrain.kernels.tuning`)."""
        return f"{self.kernel_dir(device, kernel)}/tuning"

    def tuning(self, device: str, kernel: str, cls: str) -> str:
        """The tuning file of one class (``cls``: a GEMM class, or ``squares``)."""
        return f"{self.tuning_dir(device, kernel)}/{cls}.json"

    def vk_tuning(self, device: str, kernel: str, cls: str) -> str:
        """The Vulkan tune job's file of one class: the version's shaders' choice on the
        device's Vulkan device, apart from its OpenCL choice (:meth:`tuning`)."""
        return self._p("build", device, "spirv", kernel, "tuning", f"{cls}.json")

    # data and plans (mirroring the staging root)
    def data_dir(self, rel: str) -> str:
        """``rel`` from :func:`batch_dir_rel`, under the results folder."""
        return self._p(rel)

    def plan_dir(self, exp: str) -> str:
        return self._p(plan_dir_rel(exp))

    # deploy and train
    def deploy_manifest(self, device: str, exp: str) -> str:
        return self._p("deploy", device, f"{exp}.json")

    def run_dir(self, device: str, exp: str) -> str:
        return self._p("runs", device, exp)

    def run_file(self, device: str, exp: str, name: str) -> str:
        return f"{self.run_dir(device, exp)}/{name}"

    def probe(self, device: str) -> str:
        """The device's quiet calibration-probe figures (the train stage keeps them)."""
        return self._p("probe", f"{device}.json")

    def stage_root(self, device: str) -> str:
        """Staging root of a ``local`` device."""
        return self._p(stage_root_rel(device))

    # profile, GEMM study
    def bandwidth(self, device: str) -> str:
        return self._p("bandwidth", device, "bandwidth.csv")

    def bandwidth_bench(self, device: str) -> str:
        return self._p("bandwidth", device, "bench.json")

    def gemm(self, device: str, version: str) -> str:
        return self._p("gemm", device, f"{version}.json")

    def peaks(self, device: str) -> str:
        return self._p("peaks", f"{device}.json")

    # aggregate and report
    def summary_dir(self) -> str:
        return self._p("summary")

    def summary(self, table: str) -> str:
        return self._p("summary", f"{table}.parquet")

    def summary_complete(self) -> str:
        return self._p("summary", COMPLETE)

    def owner_lock(self) -> str:
        """The lock a workflow executing jobs here holds (phonetrain.results.owner)."""
        return self._p("owner.lock")

    def owner_note(self) -> str:
        """Who holds (or last held) :meth:`owner_lock`: pid, host, working folder, start."""
        return self._p("owner.json")

    def environment_record(self) -> str:
        """The config values the study read from the environment, as its last invocation
        that executed jobs read them (phonetrain.results.environment)."""
        return self._p("environment.json")

    def history_ledger(self) -> str:
        """Every measurement the study has aggregated (phonetrain.results.history); read
        and rewritten by each aggregation, never a rule's output."""
        return self._p("history", "measurements.parquet")

    def report_dir(self) -> str:
        return self._p("report")

    def report_html(self) -> str:
        return self._p("report", "report.html")

    def report_md(self) -> str:
        return self._p("report", "report.md")

    def figure(self, name: str, ext: str) -> str:
        return self._p("report", "figures", f"{name}.{ext}")

    def report_complete(self) -> str:
        return self._p("report", COMPLETE)

    def found(self) -> dict[str, list[str]]:
        """The raw files present under the folder, by kind (``runs``: run folders with their
        params.json; ``bandwidth``, ``builds``, ``gemm``, ``peaks``), whatever study wrote
        them: what ``phonetrain aggregate --found`` aggregates after one-off runs (kernel
        builds also from ``oneoff/``, where the workflow has none for that device and
        version)."""
        root = Path(self.root)
        globs = {"bandwidth": "bandwidth/*/bandwidth.csv",
                 "builds": "build/*/kernels/*/build.json", "gemm": "gemm/*/*.json",
                 "peaks": "peaks/*.json"}
        out = {"runs": sorted(str(p.parent) for p in root.glob(f"runs/*/*/{PARAMS}"))}
        out.update({k: sorted(str(p) for p in root.glob(g)) for k, g in globs.items()})
        built = {Path(b).relative_to(root) for b in out["builds"]}
        out["builds"] += sorted(str(p) for p in Path(self.oneoff().root).glob(globs["builds"])
                                if p.relative_to(self.oneoff().root) not in built)
        return out

    def quarantine(self, utc_stamp: str, rel: str) -> str:
        """Where the check moves an output aside: ``quarantine/<utc_stamp>/<rel>`` (``rel``:
        its path relative to the results folder)."""
        return self._p("quarantine", utc_stamp, rel)

    def oneoff(self) -> Layout:
        """The folder where one-off runs (``phonetrain run``) make their runner, kernel
        builds, data, plans and deploy manifests, laid out as a results folder, apart from the
        workflow's own (``oneoff/``)."""
        return Layout(self._p("oneoff"))

    def logs(self) -> str:
        """``logs/``: every job's log (:meth:`log`)."""
        return self._p("logs")

    def log(self, stage: str, *parts: str) -> str:
        """``logs/<stage>/<part>/.../<last>.log``."""
        return self._p("logs", stage, *parts[:-1], f"{parts[-1]}.log") if parts else \
            self._p("logs", f"{stage}.log")
