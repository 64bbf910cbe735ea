"""Lowering: spec checks, step tagging, placements' transfers and byte totals, plan files,
kernel versions (inheritance, staging, hashing) and launch geometry."""

import json
from dataclasses import replace

import numpy as np
import pytest

from phonetrain import kernels
from phonetrain.kernels import (KernelVersion, KernelVersionError, geometry, load_version,
                                register_geometry, resolve_sources, source_hash, stage_kernels)
from phonetrain.lowering import LowerError, LowerSpec, init_params, lower, write_plan_dir
from phonetrain.models import MODELS, get_model
from phonetrain.plan import PHASES, Plan

TRANSFER_OPS = ("h2d", "d2h", "map")


def _moved(plan):
    return sum(s.bytes for s in plan.steps if s.op in TRANSFER_OPS)


def test_spec_errors_name_the_field():
    with pytest.raises(LowerError, match="placement"):
        lower(LowerSpec(model="mlp_16_16", backend="opencl", transfer="copy"))
    with pytest.raises(LowerError, match="cpu"):
        lower(LowerSpec(model="mlp_16_16", placement="resident"))
    with pytest.raises(LowerError, match="batch_size"):
        lower(LowerSpec(model="mlp_16_16", batch_size=0))
    with pytest.raises(LowerError, match="lenet5 takes input .* cifar10"):
        lower(LowerSpec(model="lenet5", dataset="cifar10"))
    with pytest.raises(KeyError, match="unknown model"):
        lower(LowerSpec(model="vgg99"))


@pytest.mark.parametrize("model", sorted(MODELS))
def test_every_step_is_tagged_and_ordered(model):
    plan = lower(LowerSpec(model=model, batch_size=4, backend="opencl", placement="staged",
                           transfer="map"))
    order = {p: i for i, p in enumerate(["load", "forward", "loss", "backward", "update"])}
    last = 0
    for s in plan.steps:
        assert s.phase in PHASES and s.layer, s
        if s.op == "kernel":
            assert s.global_size and s.bytes > 0
            assert order[s.phase] >= last, f"{s.name} ({s.phase}) after phase {last}"
            last = order[s.phase]
        if s.op == "map":
            assert s.access in ("read", "write")
    gemms = [s for s in plan.steps if s.op == "kernel" and s.name.startswith("gemm")]
    assert all(s.flops > 0 for s in gemms)
    names = [s.name for s in plan.steps if s.op == "kernel"]
    assert names.count("sgd_update") == len(get_model(model).param_shapes())
    # every map is closed by an unmap of the same tensor before the next kernel
    open_maps = set()
    for s in plan.steps:
        if s.op == "map":
            open_maps.add(s.tensor)
        elif s.op == "unmap":
            open_maps.discard(s.tensor)
        elif s.op == "kernel":
            assert not open_maps
    Plan.from_json(json.loads(json.dumps(plan.to_json())))  # valid, round-trips


def test_first_layer_computes_no_input_gradient():
    plan = lower(LowerSpec(model="lenet5", batch_size=2))
    conv1 = [s.name for s in plan.steps if s.layer == "conv1" and s.phase == "backward"]
    assert conv1 == ["swap01", "gemm_nt", "bias_grad"]
    conv2 = [s.name for s in plan.steps if s.layer == "conv2" and s.phase == "backward"]
    assert conv2 == ["swap01", "gemm_nt", "gemm_tn", "col2im", "bias_grad"]
    assert not any(t.name == "input.grad" for t in plan.tensors)


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("transfer", ["copy", "map"])
def test_transfer_bytes_per_placement_follow_kernel_buffer_access(model, transfer):
    B = 4
    m = get_model(model)
    resident = lower(LowerSpec(model=model, batch_size=B, backend="opencl",
                               placement="resident", transfer=transfer))
    staged = lower(LowerSpec(model=model, batch_size=B, backend="opencl", placement="staged",
                             transfer=transfer))
    cpu = lower(LowerSpec(model=model, batch_size=B))
    batch_bytes = 4 * B * int(np.prod(m.input_shape)) + 4 * B
    assert _moved(resident) == batch_bytes + 4  # the batch up, the loss down
    # staged: every buffer a kernel reads is written before it, every buffer it writes is
    # read after it (a read-write buffer both ways)
    expect = 0
    for s in cpu.steps:
        if s.op != "kernel":
            continue
        bound = kernels.bind_args(s.name, s.args)
        for arg, acc in kernels.buffer_access(s.name, bound).items():
            expect += cpu.tensors[bound[arg]].size_bytes * len(acc)
    assert _moved(staged) == expect == sum(s.bytes for s in cpu.steps if s.op == "kernel")
    assert _moved(cpu) == 0 and not cpu.programs
    # homes: resident keeps params on the device, staged and cpu on the host
    w = resident.by_name(next(iter(m.param_shapes())))
    assert w.home == "device" and resident.by_name("loss").home == "host"
    assert {t.home for t in staged.tensors} == {t.home for t in cpu.tensors} == {"host"}


def test_copy_and_map_transfers_emit_their_ops():
    spec = LowerSpec(model="mlp_16_16", batch_size=4, backend="opencl", placement="resident",
                     transfer="copy")
    ops = [s.op for s in lower(spec).steps if s.phase == "transfer"]
    assert ops == ["h2d", "h2d", "d2h"]
    ops = [(s.op, s.access) for s in lower(replace(spec, transfer="map")).steps
           if s.phase == "transfer"]
    assert ops == [("map", "write"), ("unmap", None), ("map", "write"), ("unmap", None),
                   ("map", "read"), ("unmap", None)]


def test_plan_dir_holds_initial_params_and_is_replaced_atomically(tmp_path):
    spec = LowerSpec(model="lenet5", batch_size=2, seed=7, plan_id="p1")
    d = write_plan_dir(spec, tmp_path)
    assert d == tmp_path / "plans" / "p1"
    plan = Plan.load(d / "plan.json")
    for name, arr in init_params(get_model("lenet5"), 7).items():
        t = plan.by_name(name)
        assert t.init == {"kind": "file", "path": f"plans/p1/tensors/{name}.f32"}
        np.testing.assert_array_equal(np.fromfile(tmp_path / t.init["path"], "<f4"), arr.ravel())
    assert plan.batches[0].path == "data/digits/b2/images.f32"
    # rewriting replaces atomically and leaves no temp folders
    write_plan_dir(replace(spec, seed=8), tmp_path)
    assert sorted(p.name for p in (tmp_path / "plans").iterdir()) == ["p1"]
    w8 = np.fromfile(d / "tensors" / "conv1.weight.f32", "<f4")
    assert not np.array_equal(w8, init_params(get_model("lenet5"), 7)["conv1.weight"].ravel())


def test_initial_params_stay_within_fan_in_bounds():
    params = init_params(get_model("lenet5"), 0)
    assert np.abs(params["conv1.weight"]).max() <= 1 / 5  # fan_in 25
    assert np.abs(params["fc1.bias"]).max() <= 1 / 20  # fan_in 400
    assert params["fc1.weight"].std() > 0.5 / 20 / np.sqrt(3)
    assert not np.array_equal(init_params(get_model("lenet5"), 1)["fc3.bias"], params["fc3.bias"])


def test_default_plan_id_changes_with_every_field():
    a = LowerSpec(model="mlp_16_16")
    assert a.resolved_plan_id().startswith("mlp_16_16-b32-cpu-")
    assert a.resolved_plan_id() != replace(a, lr=0.1).resolved_plan_id()
    assert a.resolved_plan_id() == LowerSpec(model="mlp_16_16").resolved_plan_id()


# ---------------------------------------------------------------- kernel versions

def _version(root, name, files=(), yaml=None):
    d = root / name
    d.mkdir(parents=True)
    for f, text in files:
        (d / f).write_text(text)
    if yaml is not None:
        (d / "version.yaml").write_text(yaml)


def test_version_inherits_sources_and_defines_and_stages_them(tmp_path):
    root = tmp_path / "kernels"
    _version(root, "base", [("gemm.cl", "__kernel void gemm_nn() {}"),
                            ("elementwise.cl", "__kernel void relu_fwd() {}")],
             "build_options: -cl-mad-enable\ndefines: {TS: 8}\n")
    _version(root, "fast", [("gemm.cl", "// faster\n__kernel void gemm_nn() {}")],
             "inherits: base\ndefines: {TS: 16, WPT: 4}\nlocal_sizes: {gemm_nn: [8, 8]}\n")
    src = resolve_sources("fast", root)
    assert src == {"elementwise.cl": root / "base" / "elementwise.cl",
                   "gemm.cl": root / "fast" / "gemm.cl"}
    v = load_version("fast", root)
    assert v.chain == ["fast", "base"] and v.inherits == "base"
    assert v.options == "-cl-mad-enable -DTS=16 -DWPT=4"
    dest = stage_kernels("fast", tmp_path / "stage", root)
    assert dest == tmp_path / "stage" / "kernels" / "fast"
    assert sorted(p.name for p in dest.iterdir()) == ["elementwise.cl", "gemm.cl"]
    assert (dest / "gemm.cl").read_text().startswith("// faster")
    h = source_hash("fast", root)
    (root / "base" / "elementwise.cl").write_text("__kernel void relu_fwd() { }")
    assert source_hash("fast", root) != h
    stage_kernels("fast", tmp_path / "stage", root)  # restaging replaces
    assert (dest / "elementwise.cl").read_text().endswith("{ }")
    assert [p.name for p in (tmp_path / "stage" / "kernels").iterdir()] == ["fast"]


def test_version_cycle_unknown_key_and_unknown_name_are_errors(tmp_path):
    root = tmp_path / "kernels"
    _version(root, "a", yaml="inherits: b\n")
    _version(root, "b", yaml="inherits: a\n")
    _version(root, "c", yaml="tile: 4\n")
    with pytest.raises(KernelVersionError, match="cycle"):
        load_version("a", root)
    with pytest.raises(KernelVersionError, match=r"version.yaml: unknown key.*tile"):
        load_version("c", root)
    with pytest.raises(KernelVersionError, match="known versions: a, b, c"):
        load_version("zzz", root)


def test_lowering_rejects_version_missing_a_kernel(tmp_path):
    root = tmp_path / "kernels"
    _version(root, "partial",
             [("gemm.cl", "GEMM_KERNEL(gemm_nt, 0, 1)\nGEMM_KERNEL(gemm_tn, 1, 0)")])
    with pytest.raises(LowerError, match=r"partial.*\['bias_add', .*'sgd_update'"):
        lower(LowerSpec(model="mlp_16_16", backend="opencl", placement="resident",
                        transfer="copy", kernel="partial"), kernels_root=root)


def test_lowered_plan_builds_every_baseline_source():
    plan = lower(LowerSpec(model="lenet5", backend="opencl", placement="resident",
                           transfer="copy"))
    assert {p.source for p in plan.programs} == {
        f"kernels/baseline/{f}" for f in resolve_sources("baseline")}


def test_geometry_follows_baseline_local_sizes_and_registered_rules():
    v = KernelVersion(name="v", chain=["v"])
    assert geometry("gemm_nt", {"M": 32, "N": 16, "K": 7}, v) == ([16, 32], None)
    assert geometry("im2col", dict(B=2, C=3, H=5, W=5, KH=3, KW=3, OH=3, OW=3), v) == (
        [18, 27], None)
    v.local_sizes["gemm_nt"] = [8, 5]
    assert geometry("gemm_nt", {"M": 32, "N": 20, "K": 7}, v) == ([24, 35], [8, 5])

    @register_geometry("test_tiles")
    def tiles(name, dims, version):
        if not name.startswith("gemm"):
            return None
        return [-(-int(dims["N"]) // 4) * 4, -(-int(dims["M"]) // 4) * 4], [4, 4]

    child = KernelVersion(name="child", chain=["child", "baseline"], geometry="test_tiles")
    assert geometry("gemm_nn", {"M": 5, "N": 6, "K": 1}, child) == ([8, 8], [4, 4])
    assert geometry("relu_fwd", {"n": 10}, child) == ([10], None)
    assert geometry("gemm_nn", {"M": 5, "N": 6, "K": 1}, load_version("baseline")) == (
        [6, 5], None)


def test_a_reduction_local_size_keeps_one_work_group_per_output():
    """conv_sgd takes one work-group per weight (and per bias): 2*3*3 + 1 = 19 outputs along
    dimension 0, at the default REDUCE_LOCAL of 64 and at a local size given by the version."""
    dims = dict(B=2, C=2, H=5, W=5, OC=3, KH=3, KW=3, stride=1, pad=1, OH=5, OW=5, lr=0.1,
                momentum=0.0, weight_decay=0.0)
    v = KernelVersion(name="v", chain=["v"])
    assert geometry("conv_sgd", dims, v) == ([19 * 64, 3], [64, 1])
    v.local_sizes["conv_sgd"] = [256, 1]
    assert geometry("conv_sgd", dims, v) == ([19 * 256, 3], [256, 1])
    v.local_sizes["conv_sgd"] = [16, 2]   # several output channels per work-group
    assert geometry("conv_sgd", dims, v) == ([19 * 16, 4], [16, 2])


@pytest.mark.parametrize("layers", [(), ("relu",), ("flatten",)])
@pytest.mark.parametrize("backend", [{}, {"backend": "opencl", "placement": "resident",
                                          "transfer": "copy"},
                                     {"backend": "opencl", "placement": "staged",
                                      "transfer": "copy", "kernel": "fused"}])
def test_model_without_parameters_is_a_lower_error_naming_it(layers, backend):
    """A model of zero layers (or only parameter-free ones) has nothing to train: one
    LowerError naming the model and what to add, not a StopIteration from the builder."""
    from phonetrain.models import Flatten, Model, ReLU
    made = {"relu": ReLU("relu1"), "flatten": Flatten("flatten")}
    model = Model("empty_16", (16,), 16, tuple(made[k] for k in layers))
    with pytest.raises(LowerError) as e:
        lower(LowerSpec(model="empty_16", batch_size=4, dataset="synthetic", **backend),
              model=model)
    msg = str(e.value)
    assert "model empty_16 has no layer with parameters" in msg and "Linear" in msg, msg
