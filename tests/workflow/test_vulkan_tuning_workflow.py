"""The workflow's Vulkan tune job on lavapipe: a Vulkan run of a version whose shaders have
tuning candidates (tiled) deploys the plan its device's Vulkan tune job chose, per GEMM class
of its plan, as an OpenCL run takes its OpenCL tuning; a run of the baseline shaders (no
candidates) has no such job."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.workflow import TINY, make_workspace, planned, snakemake
from phonetrain.kernels import load_version, tuning
from phonetrain.kernels.spirv import shader_candidates, spec_options
from phonetrain.plan import Plan

OVER = TINY + ["sweep.models=[mlp_16_16]", "sweep.backends=[vulkan]"]
# two small candidates beside the defaults keep the job short on lavapipe
SPACE = """candidates:
  - {defines: {TSM: 16, TSN: 16, TSK: 8, WPTM: 2, WPTN: 2}}
  - {defines: {TSM: 32, TSN: 32, TSK: 8, WPTM: 4, WPTN: 4, PAD: 4, VW: 4, PREFETCH: 1, DBUF: 1}}
"""


def test_a_vulkan_tiled_run_deploys_its_tune_jobs_choice(lavapipe, runner, tmp_path: Path):
    ws = make_workspace(tmp_path / "ws", runner)
    yml = ws / "src" / "kernels" / "tiled" / "vk" / "tuning.yaml"
    text = yml.read_text()
    head, tail = text.split("candidates:\n", 1)
    rest = tail[tail.index("# Constraints"):]
    yml.write_text(head + SPACE + rest)
    assert planned(ws, OVER + ["sweep.kernels=[baseline]"]).get("tune_vulkan_baseline") is None
    over = OVER + ["sweep.kernels=[tiled]"]
    assert planned(ws, over)["tune_vulkan_tiled"] == 1

    rdir = ws / "results" / "runs" / "host" / "mlp_16_16.vulkan.tiled"
    p = snakemake(ws, str((rdir / "run.json").relative_to(ws)), overrides=over)
    assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
    tdir = ws / "results" / "build" / "host" / "spirv" / "tiled" / "tuning"
    files = sorted(f for f in tdir.glob("*.json") if f.stem != tuning.SQUARES)
    assert files and all(json.loads(f.read_text())["api"] == "vulkan" for f in files)
    tuned = tuning.load_tunings(files)
    plan = Plan.load(rdir / "plan.json")
    assert {f.stem for f in files} == set(tuning.plan_classes(plan))
    cls = json.loads(next((ws / "results" / "deploy" / "host").glob("*.json")).read_text())[
        "tuned_class"]
    assert cls in tuned["classes"]
    space = [c["defines"] for c in shader_candidates("tiled", ws / "src" / "kernels")]
    assert tuned["classes"][cls]["defines"] in space and len(space) == 3
    want = spec_options(tuning.candidate_version(load_version("tiled"), tuned["classes"][cls]))
    assert {pr.options for pr in plan.programs} == {want}
    assert json.loads((rdir / "verify.json").read_text())["ok"]
