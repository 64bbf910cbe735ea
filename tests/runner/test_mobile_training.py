"""The small VGG- and MobileNetV2-style models through the real runner: they train on digits
(the loss falls over 100 SGD iterations, CPU backend) and a short run passes the per-step
verification (phonetrain.reference.steps) on the CPU backend and on PoCL. Plus the argument
checks of the CPU backend's mobile operators (src/runner/cpu_mobile.c, through ctypes and the
CPU backend's one kernel table)."""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from phonetrain import reference
from phonetrain import runner as runner_api
from phonetrain.devices.toolchains import cpu_backend_sources
from phonetrain.lowering import LowerSpec, write_bundle
from phonetrain.plan import Plan

MODELS = ["vgg_small", "mobilenetv2_small"]


@pytest.mark.parametrize("model", MODELS)
def test_cnn_trains_on_digits(runner, tmp_path, model):
    """One digits batch seen 100 times: correct forward, backward and update steps memorize it
    (the loss ends below a quarter of where it began; 2.3 -> 3e-7 and 2.1 -> 0.04 here), a
    margin no float32 summation order or machine can close."""
    spec = LowerSpec(model=model, batch_size=8, backend="cpu", dataset="digits", num_batches=1,
                     warmup=0, iterations=100, lr=0.01, momentum=0.9, dumps="none",
                     checkpoints=())
    plan_path = write_bundle(spec, tmp_path, seed=0)
    # one thread: on a shared 2-core host, OpenMP barriers of 171 small launches cost more
    # than they parallelize
    doc = runner_api.run_plan(runner, plan_path, tmp_path, tmp_path / "out", threads=1)
    losses = np.array([it["loss"] for it in doc["iters"]])
    assert losses.size == 100 and np.isfinite(losses).all()
    assert losses[-10:].mean() < 0.25 * losses[:10].mean(), losses[::10]


@pytest.mark.parametrize("model,backend,placement,transfer", [
    ("vgg_small", "cpu", None, None), ("vgg_small", "opencl", "resident", "copy"),
    ("mobilenetv2_small", "cpu", None, None), ("mobilenetv2_small", "opencl", "staged", "map")])
def test_short_run_verifies_per_step(runner, request, tmp_path, model, backend, placement,
                                     transfer):
    spec = LowerSpec(model=model, batch_size=2, backend=backend, placement=placement,
                     transfer=transfer, dataset="digits", num_batches=2, warmup=0,
                     iterations=2)
    plan_path = write_bundle(spec, tmp_path, seed=0)
    selector = request.getfixturevalue("pocl") if backend == "opencl" else None
    runner_api.run_plan(runner, plan_path, tmp_path, tmp_path / "out", threads=1,
                        device_selector=selector)
    plan = Plan.load(plan_path)
    doc = reference.verify_run_dir(plan, tmp_path, tmp_path / "out")
    assert doc["method"] == "per-step" and doc["ok"], doc["worst"]
    assert [s["iteration"] for s in doc["steps"]] == [0, 1]
    # the running statistics are checkpointed state, and were compared
    assert all("stem_bn.running_var" in s["tensors"] for s in doc["steps"]) or model == "vgg_small"


class RtArg(ctypes.Structure):
    """Mirror of ``rt_arg`` in src/runner/cpu_kernels.h."""
    _fields_ = [("kind", ctypes.c_char), ("i", ctypes.c_int), ("f", ctypes.c_float),
                ("p", ctypes.c_void_p), ("numel", ctypes.c_long)]


@pytest.fixture(scope="module")
def mobile_lib(tmp_path_factory):
    """The CPU backend (src/runner/cpu_*.c, every kernel through the generated table of
    cpu_kernels.c) as a shared library."""
    so = tmp_path_factory.mktemp("cpu_mobile") / "libcpu_kernels.so"
    subprocess.run(["cc", "-std=c11", "-O3", "-fopenmp", "-fPIC", "-shared", "-Wall", "-Wextra",
                    "-Werror", *map(str, cpu_backend_sources()), "-o", str(so), "-lm"],
                   check=True)
    lib = ctypes.CDLL(str(so))
    lib.cpu_kernel_run.argtypes = [ctypes.c_char_p, ctypes.POINTER(RtArg), ctypes.c_int,
                                   ctypes.c_char_p, ctypes.c_int]
    return lib


F32 = np.zeros(64, np.float32)
ERRORS = [
    ("dwconv3x3_fwd", [1, 1, 5, 5, 2, 1, 4, 3, F32, F32, F32],
     "dwconv3x3_fwd: argument 6 (OH) is 4; (H + 2*pad - 3)/stride + 1 = 3"),
    ("dwconv3x3_bwd_weight", [1, 8, 2, 2, 1, 1, 2, 2, F32, F32, F32],
     "dwconv3x3_bwd_weight: argument 10 (dWt) has 64 elements but C*9 = 72 are needed"),
    ("batchnorm_stats", [2, 2, 2, 0.0, 0.1, F32, F32, F32, F32, F32],
     "batchnorm_stats: argument 3 (eps) is 0; eps must be > 0"),
    ("batchnorm_bwd_data", [2, 2, 2, F32, F32, F32, F32, F32, F32, F32],
     "batchnorm_bwd_data: 10 arguments given, 11 expected"),
    ("gap_fwd", [3, 5, 5, F32, F32], "gap_fwd: argument 3 (X) has 64 elements but B*C*HW = 75"),
    ("add", [2, F32, 1.0, F32], "add: argument 2 (B) has kind 'f'; expected 't'"),
]


@pytest.mark.parametrize("name,args,message", ERRORS, ids=[e[0] for e in ERRORS])
def test_mobile_operators_name_the_bad_argument(mobile_lib, name, args, message):
    arr = (RtArg * len(args))()
    for k, a in enumerate(args):
        if isinstance(a, np.ndarray):
            arr[k] = RtArg(b"t", 0, 0.0, a.ctypes.data, a.size)
        elif isinstance(a, float):
            arr[k] = RtArg(b"f", 0, a, None, 0)
        else:
            arr[k] = RtArg(b"i", a, 0.0, None, 0)
    err = ctypes.create_string_buffer(512)
    assert mobile_lib.cpu_kernel_run(name.encode(), arr, len(args), err, 512) == -1
    assert err.value.decode().startswith(message), err.value.decode()
    assert mobile_lib.cpu_kernel_known(b"relu6_fwd") == 1
    assert mobile_lib.cpu_kernel_known(b"relu7_fwd") == 0
