"""The Vulkan backend on Mesa lavapipe: every baseline and fused shader against the numpy
oracle, the training step of the four study models verified per step against the reference in
each placement (and with the tiled and fused versions), a shader that does not compile, and
the runner's errors for a Vulkan bundle."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from helpers.case_plans import case_steps, mismatches, read_dumps
from helpers.kernel_cases import Case, gemm_cases, group_cases
from phonetrain import reference
from phonetrain import runner as runner_api
from phonetrain.kernels import load_version
from phonetrain.kernels.spirv import (ShaderError, device_misfit, resolve_shaders,
                                      shader_candidates, spec_options, stage_spirv)
from phonetrain.kernels.tuning import candidate_version
from phonetrain.layout import device_spirv
from phonetrain.lowering import LowerSpec, write_bundle
from phonetrain.plan import Plan, Program
from phonetrain.results import profiling

# The groups of tests/helpers/kernel_cases.py whose every kernel has a baseline shader, and
# those of the fused kernels (src/kernels/fused/vk), each with the version that runs it.
GROUPS = [(g, "baseline") for g in
          ["gemm", "elementwise", "conv", "pool", "loss", "optimizer", "mobile"]] + \
    [("fused", "fused"), ("fused_bn", "fused")]
PLACEMENTS = [("resident", "copy"), ("staged", "copy"), ("resident", "map"), ("staged", "map")]


def _kernel_plan(cases: list[Case], root: Path, padded: bool, version: str = "baseline",
                 cand: dict | None = None) -> Plan:
    """One Vulkan plan running every case once on its own device tensors (loaded from
    ``root/tensors``), every output dumped; ``padded`` rounds each global size up to a
    multiple of an explicit local size (invocations past the edge must return early).
    ``cand``: a tuning candidate of the version's shaders (its specialization constants and
    the launch geometry they imply)."""
    kv = load_version(version)
    if cand is not None:
        kv = candidate_version(kv, cand)
    tensors, steps, dumps = case_steps(cases, root, kv, "device", padded)
    kernels = sorted({c.kernel for c in cases})
    stage_spirv(version, root, kernels=set(kernels))
    programs = [Program(name=k, source=f"{device_spirv(version)}/{k}.spv",
                        options=spec_options(kv)) for k in kernels]
    plan = Plan(name=f"kernels/{version}/vulkan", backend="vulkan", tensors=tensors, steps=steps,
                programs=programs, warmup=0, iterations=1, dumps=dumps)
    plan.validate()
    return plan


def _check_cases(runner, lavapipe, tmp_path: Path, cases: list[Case], plan: Plan) -> None:
    """Run the plan of :func:`_kernel_plan` on lavapipe and compare every dumped output
    with the case's numpy oracle; one assertion listing every mismatch."""
    root = tmp_path / "bundle"
    plan.save(root / "plan.json")
    doc = runner_api.run_plan(runner, root / "plan.json", root, tmp_path / "out",
                              device_selector=lavapipe)
    assert doc["backend"] == "vulkan" and "llvmpipe" in doc["device"]["name"]
    failures = mismatches(cases, read_dumps(cases, tmp_path / "out"))
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("padded", [False, True], ids=["abi-launch", "padded"])
@pytest.mark.parametrize("group,version", GROUPS, ids=[g for g, _ in GROUPS])
def test_vulkan_shaders_match_numpy(runner, lavapipe, tmp_path, group, version, padded):
    """Every case of the group, at the version's launch geometry (its version.yaml local
    sizes: the fused reductions' work-groups of 256) or padded to a small explicit work-group
    (invocations and, for the reductions, whole work-groups past the edge)."""
    cases = group_cases(group)
    _check_cases(runner, lavapipe, tmp_path, cases,
                 _kernel_plan(cases, tmp_path / "bundle", padded, version))


TILED_CANDIDATES = shader_candidates("tiled")
# Shapes for gemm_tiled.glsl's vector paths: tiles wholly inside with every size a multiple
# of 4 (vec4 global loads), edge tiles with aligned sizes, and sizes that are not multiples of
# 4 (the vec4 loads must give way to checked scalar ones).
VECTOR_SHAPES = [(64, 96, 40), (128, 128, 64), (68, 132, 36), (65, 66, 67), (132, 4, 8)]
# Each code path of gemm_tiled.glsl alone and together, all within Vulkan's minimum 16 KiB of
# shared memory: vec4 shared reads, prefetch, two tiles, vec4 global loads, a slice whose
# chunks do not divide among the invocations (TSK 12), and VW 2 (pairs of outputs, scalar
# reads, rows not vec4-aligned)
TILED_PATHS = [
    {"TSM": 32, "TSN": 32, "TSK": 8, "WPTM": 4, "WPTN": 4, "PAD": 4, "VW": 4},
    {"TSM": 32, "TSN": 32, "TSK": 8, "WPTM": 4, "WPTN": 4, "PREFETCH": 1},
    {"TSM": 32, "TSN": 32, "TSK": 8, "WPTM": 4, "WPTN": 4, "DBUF": 1},
    {"TSM": 32, "TSN": 32, "TSK": 8, "WPTM": 4, "WPTN": 4, "GVW": 4},
    {"TSM": 32, "TSN": 64, "TSK": 12, "WPTM": 4, "WPTN": 8, "PAD": 4, "VW": 4, "PREFETCH": 1,
     "DBUF": 1, "GVW": 4},
    {"TSM": 64, "TSN": 64, "TSK": 8, "WPTM": 8, "WPTN": 8, "PAD": 4, "VW": 4, "PREFETCH": 1,
     "DBUF": 1, "GVW": 4},
    {"TSM": 16, "TSN": 16, "TSK": 4, "WPTM": 2, "WPTN": 2, "PAD": 1, "VW": 2, "PREFETCH": 1,
     "DBUF": 1, "GVW": 4},
]


def _tiled_cases() -> list[Case]:
    """The gemm group's cases (edge tiles, K not a multiple of TSK, alpha/beta, all three
    transposes) and the same kernels at :data:`VECTOR_SHAPES`."""
    return group_cases("gemm") + gemm_cases(np.random.default_rng(1), VECTOR_SHAPES)


@pytest.fixture(scope="module")
def lavapipe_device(runner, lavapipe) -> dict:
    """lavapipe's device document as ``runner info`` reports it (its limits)."""
    return next(d for d in runner_api.info(runner)["vulkan_devices"] if "llvmpipe" in d["name"])


@pytest.mark.parametrize("cand", TILED_CANDIDATES,
                         ids=[f"cand{i}" for i in range(len(TILED_CANDIDATES))])
def test_vulkan_tiled_gemm_matches_numpy(runner, lavapipe, lavapipe_device, tmp_path, cand):
    """The tiled GEMM shaders under each tuning candidate (the defaults first) at the tiled
    rule's launch (:func:`_tiled_cases`); the models' own GEMM calls run in the
    training-step test. A candidate past lavapipe's limits (device_constraints) is skipped,
    as the tuner skips it."""
    assert resolve_shaders("tiled")["gemm_nn"].parent.name == "vk"
    why = device_misfit("tiled", cand["defines"], lavapipe_device)
    if why:
        pytest.skip(why)
    cases = _tiled_cases()
    _check_cases(runner, lavapipe, tmp_path, cases,
                 _kernel_plan(cases, tmp_path / "bundle", False, "tiled", cand))


@pytest.mark.parametrize("defines", TILED_PATHS,
                         ids=[f"path{i}" for i in range(len(TILED_PATHS))])
def test_vulkan_tiled_gemm_paths_match_numpy(runner, lavapipe, tmp_path, defines):
    """Every code path of the tiled shaders (:data:`TILED_PATHS`) against the numpy oracle."""
    cand = {"defines": {**shader_candidates("tiled")[0]["defines"], **defines}, "local": None}
    cases = _tiled_cases()
    _check_cases(runner, lavapipe, tmp_path, cases,
                 _kernel_plan(cases, tmp_path / "bundle", False, "tiled", cand))


STUDY_MODELS = ["mlp_784_256_128_16", "lenet5", "vgg_small", "mobilenetv2_small"]
RUNS = [(m, p, t, "baseline") for m in STUDY_MODELS for p, t in PLACEMENTS] + \
    [(m, "resident", "copy", k) for k in ("tiled", "fused") for m in STUDY_MODELS] + \
    [("mlp_784_256_128_16", "staged", "map", "fused")]


@pytest.mark.parametrize("model,placement,transfer,kernel", RUNS,
                         ids=[f"{m}-{p}-{t}-{k}" for m, p, t, k in RUNS])
def test_vulkan_training_step_verifies(runner, lavapipe, tmp_path, model, placement, transfer,
                                       kernel):
    """Three SGD steps (momentum, weight decay) on lavapipe, each checkpointed step
    reproduced by the numpy reference; the trace has device times for every command. The
    tiled version runs every GEMM of the model's step through its shared-memory shaders;
    the fused version runs the fused step (its own shaders, maxpool_fwd and the pooling
    kernels from baseline), its programs specialized with its defines."""
    spec = LowerSpec(model=model, batch_size=4, backend="vulkan", placement=placement,
                     transfer=transfer, warmup=1, iterations=2, num_batches=2, momentum=0.9,
                     weight_decay=1e-3, dumps="all", kernel=kernel)
    plan_path = write_bundle(spec, tmp_path)
    if kernel == "tiled":
        gemm = [p for p in Plan.load(plan_path).programs if p.name.startswith("gemm_")]
        assert gemm and all("-DTSM=" in p.options for p in gemm)
    if kernel == "fused":
        plan = Plan.load(plan_path)
        names = {s.name for s in plan.steps if s.op == "kernel"}
        assert "softmax_xent_bwd" in names and not names & {"gemm_nn", "gemm_nt", "gemm_tn"}
        assert {p.options for p in plan.programs} == {"-DLIN_T=16 -DLIN_TK=64 -DLOSS_WG=64"}
    out = tmp_path / "out"
    doc = runner_api.run_plan(runner, plan_path, tmp_path, out, device_selector=lavapipe)
    assert doc["status"] == "ok" and doc["backend"] == "vulkan" and len(doc["iters"]) == 3
    v = reference.verify_run_dir(Plan.load(plan_path), tmp_path, out)
    assert v["method"] == "per-step" and v["ok"], (v["worst"], v["max_abs_err"])
    assert [s["iteration"] for s in v["steps"]] == [0, 1, 2]
    assert doc["device"]["memory_types"] and "host_visible_device_local" in doc["device"]
    trace = runner_api.read_trace(out)
    device_rows = trace[trace["kind"].isin(["kernel", "h2d", "d2h"])]
    assert len(device_rows) and (device_rows["end_ns"] >= device_rows["start_ns"]).all()
    assert (device_rows["start_ns"] > 0).all()
    kinds = set(trace["kind"])
    assert ({"map", "unmap"} <= kinds) == (transfer == "map")
    assert ("h2d" in kinds) == (transfer == "copy")
    host_copies = set(trace.loc[trace["kind"] == "host", "op"]) - {"load"}
    assert host_copies == {"map_copy" if transfer == "map" else "staging_copy"}
    # every device row's interval on the host clock lies within its own host span: the
    # profiling's clock alignment finds one offset for the run
    assert np.isfinite(profiling.clock_offset(trace)[1])


# Batch sizes whose sums are long enough to split (conv_sgd_splits: 1024 products a chunk at
# least): LeNet-5's conv1 at batch 4, MobileNetV2's first units from batch 11.
@pytest.mark.parametrize("model,batch,split", [("lenet5", 4, "conv_wgrad_partial"),
                                               ("mobilenetv2_small", 11, "gconv_wgrad_partial")])
def test_vulkan_fused_split_k_step_verifies(runner, lavapipe, tmp_path, model, batch, split):
    """The fused step with split-K weight updates (``splitk_groups``: the partial-sum and
    finish shaders in place of conv_sgd / gconv_sgd where the sums are long and few) on
    lavapipe, every step reproduced by the numpy reference."""
    spec = LowerSpec(model=model, batch_size=batch, backend="vulkan", placement="resident",
                     transfer="copy", warmup=1, iterations=1, num_batches=2, momentum=0.9,
                     weight_decay=1e-3, dumps="all", kernel="fused", splitk_groups=1024)
    plan_path = write_bundle(spec, tmp_path)
    names = [s.name for s in Plan.load(plan_path).steps if s.op == "kernel"]
    assert split in names and split.replace("wgrad_partial", "sgd_finish") in names
    out = tmp_path / "out"
    doc = runner_api.run_plan(runner, plan_path, tmp_path, out, device_selector=lavapipe)
    assert doc["status"] == "ok" and doc["backend"] == "vulkan"
    v = reference.verify_run_dir(Plan.load(plan_path), tmp_path, out)
    assert v["method"] == "per-step" and v["ok"], (v["worst"], v["max_abs_err"])


def test_shader_compile_error_names_file_and_line(tmp_path):
    """A planted syntax error in a copy of the kernels: staging the version's SPIR-V fails
    with glslc's message naming the shader and the line, and leaves no SPIR-V folder."""
    root = tmp_path / "kernels"
    shutil.copytree(Path(resolve_shaders("baseline")["relu_fwd"]).parents[2], root)
    shader = root / "baseline" / "vk" / "relu_fwd.comp"
    lines = shader.read_text().splitlines()
    body = lines.index("    Y[i] = max(X[i], 0.0);")
    lines[body] = lines[body].replace(";", "")   # a missing semicolon
    shader.write_text("\n".join(lines) + "\n")
    with pytest.raises(ShaderError) as e:
        stage_spirv("baseline", tmp_path / "stage", kernels_root=root)
    assert f"relu_fwd.comp:{body + 2}: error" in str(e.value) or \
        f"relu_fwd.comp:{body + 1}: error" in str(e.value), str(e.value)
    assert not (tmp_path / "stage" / device_spirv("baseline")).exists()


def test_missing_spirv_is_a_bundle_error(runner, lavapipe, tmp_path):
    spec = LowerSpec(model="mlp_16_16", batch_size=4, backend="vulkan", placement="resident",
                     transfer="copy", warmup=0, iterations=1, num_batches=1, dataset="synthetic")
    plan_path = write_bundle(spec, tmp_path)
    prog = json.loads(plan_path.read_text())["programs"][0]
    (tmp_path / prog["source"]).unlink()
    with pytest.raises(runner_api.BundleFileError, match=prog["name"]):
        runner_api.run_plan(runner, plan_path, tmp_path, tmp_path / "out",
                            device_selector=lavapipe)


def test_no_matching_vulkan_device_lists_the_devices(runner, lavapipe, tmp_path):
    spec = LowerSpec(model="mlp_16_16", batch_size=4, backend="vulkan", placement="resident",
                     transfer="copy", warmup=0, iterations=1, num_batches=1, dataset="synthetic")
    plan_path = write_bundle(spec, tmp_path)
    sel = runner_api.DeviceSelector(vk_device="no-such-gpu")
    with pytest.raises(runner_api.NoDeviceError, match="llvmpipe"):
        runner_api.run_plan(runner, plan_path, tmp_path, tmp_path / "out", device_selector=sel)


def test_an_option_outside_the_spec_table_is_a_bad_plan(runner, lavapipe, tmp_path):
    """A program option the Vulkan ABI has no specialization constant for (regblock's
    OpenCL-only RM) stops the run naming the program and the option."""
    spec = LowerSpec(model="mlp_16_16", batch_size=4, backend="vulkan", placement="resident",
                     transfer="copy", warmup=0, iterations=1, num_batches=1, dataset="synthetic",
                     kernel="tiled")
    plan_path = write_bundle(spec, tmp_path)
    doc = json.loads(plan_path.read_text())
    prog = next(p for p in doc["programs"] if p["name"].startswith("gemm_"))
    prog["options"] += " -DRM=8"
    plan_path.write_text(json.dumps(doc))
    with pytest.raises(runner_api.BadInputError, match=rf'{prog["name"]}.*"-DRM=8"'):
        runner_api.run_plan(runner, plan_path, tmp_path, tmp_path / "out",
                            device_selector=lavapipe)


def test_no_vulkan_library_is_a_missing_library(runner, tmp_path):
    """A device without Vulkan (here: a libvulkan path that does not load) exits with the
    missing-library status, which the workflow records as a skipped run (as for CLBlast)."""
    spec = LowerSpec(model="mlp_16_16", batch_size=4, backend="vulkan", placement="resident",
                     transfer="copy", warmup=0, iterations=1, num_batches=1, dataset="synthetic")
    plan_path = write_bundle(spec, tmp_path)
    sel = runner_api.DeviceSelector(vk_lib=str(tmp_path / "libNoSuchVulkan.so"))
    with pytest.raises(runner_api.MissingLibraryError, match="no Vulkan library"):
        runner_api.run_plan(runner, plan_path, tmp_path, tmp_path / "out", device_selector=sel)
