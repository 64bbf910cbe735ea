"""Bad input to the runner: each failure class gives its exit code, one stderr line naming the
cause, and no output that looks complete (run.json says "failed"; no trace.csv, no dumps)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from phonetrain import runner as rt
from phonetrain.plan import Plan, Program, Step, Tensor

FILL_CL = """__kernel void fill(int n, float value, __global float *X) {
    int i = get_global_id(0); if (i < n) X[i] = value; }
__kernel void mean(int n, __global const float *X, __global float *out) {
    if (get_global_id(0) == 0) { float s = 0; for (int i = 0; i < n; i++) s += X[i]; out[0] = s / n; } }
"""


def tiny_plan(backend: str = "opencl", value: float = 1.5, local=None) -> Plan:
    """fill X with value, loss = mean(X); X and loss dumped."""
    tensors = [Tensor(id=0, name="X", shape=[16], role="scratch", init={"kind": "file", "path": "x.f32"}),
               Tensor(id=1, name="loss", shape=[1], role="loss")]
    steps = [Step(op="kernel", name="fill", args=[{"i": 16}, {"f": value}, {"t": 0}], global_size=[16],
                  local_size=local),
             Step(op="kernel", name="mean", args=[{"i": 16}, {"t": 0}, {"t": 1}], global_size=[1])]
    if backend == "opencl":
        steps.append(Step(op="d2h", tensor=1))
    return Plan(name="tiny", backend=backend, tensors=tensors, steps=steps, warmup=0, iterations=2,
                programs=[Program(name="fill", source="k/fill.cl")] if backend == "opencl" else [],
                loss_tensor=1, dumps=[0, 1])


def stage(root: Path, plan: Plan | str, cl_source: str = FILL_CL) -> Path:
    (root / "k").mkdir(parents=True, exist_ok=True)
    (root / "k" / "fill.cl").write_text(cl_source)
    (root / "x.f32").write_bytes(b"\0" * 64)
    path = root / "plan.json"
    if isinstance(plan, str):
        path.write_text(plan)
    else:
        plan.save(path)
    return path


def assert_failed(out: Path, code: int) -> dict:
    """The output folder holds only a run.json saying failed (or nothing)."""
    assert not (out / "trace.csv").exists()
    assert not list(out.glob("dumps/*.f32"))
    doc = json.loads((out / "run.json").read_text())
    assert doc["status"] == "failed" and doc["exit_code"] == code
    return doc


def run_expect(runner, tmp_path, plan, err_cls, match, sel=None, cl_source=FILL_CL):
    path = stage(tmp_path / "b", plan, cl_source)
    sel = sel or rt.DeviceSelector(platform="portable")
    with pytest.raises(err_cls, match=match) as ei:
        rt.run_plan(runner, path, tmp_path / "b", tmp_path / "out", device_selector=sel)
    assert len([ln for ln in ei.value.stderr.splitlines() if ln.startswith("runner: ")]) == 1
    doc = assert_failed(tmp_path / "out", ei.value.exit_code)
    assert doc["error"] == ei.value.message
    return ei.value


def test_unbroken_tiny_plan_runs_on_both_backends(runner, pocl, tmp_path):
    """The baseline of the cases below: the same plan, unbroken, runs on both backends."""
    for backend in ("opencl", "cpu"):
        path = stage(tmp_path / backend, tiny_plan(backend))
        doc = rt.run_plan(runner, path, tmp_path / backend, tmp_path / backend / "out", device_selector=pocl)
        assert [i["loss"] for i in doc["iters"]] == [1.5, 1.5]


@pytest.mark.parametrize("text,match", [
    ('{"plan_version": 1, "name": "x",', r"not valid JSON: line 1 col \d+: expected a string key"),
    ('{"plan_version": 1,\n "name": "x", }', r"not valid JSON: line 2 col \d+: expected a string key"),
    ('{"plan_version": 1} trailing', "not valid JSON: .*trailing characters"),
    ('{"name": "bad \\q escape"}', "not valid JSON: .*bad escape"),
    ("[1, 2]", "the document must be a JSON object"),
    ('{"plan_version": 1, "name": "x", "backend": "cpu", "tensors": {}, "steps": [], "iterations": 1}',
     "plan.tensors must be of JSON type array, not object"),
], ids=["truncated", "trailing-comma", "trailing-text", "bad-escape", "not-object", "wrong-type"])
def test_malformed_plan_json_is_bad_input_naming_the_position(runner, tmp_path, text, match):
    e = run_expect(runner, tmp_path, text, rt.BadInputError, match)
    assert e.exit_code == rt.ExitCode.BAD_INPUT and "plan.json" in e.message


@pytest.mark.parametrize("version", [0, 3])
def test_plan_version_other_than_1_or_2_is_refused(runner, tmp_path, version):
    doc = tiny_plan().to_json()
    doc["plan_version"] = version
    run_expect(runner, tmp_path, json.dumps(doc), rt.BadInputError, "reads versions 1 to 2 only")


def test_unknown_kernel_name_is_refused_with_its_step(runner, tmp_path):
    plan = tiny_plan("cpu")
    plan.steps[0].name = "gemm_xx"
    run_expect(runner, tmp_path, plan, rt.BadInputError, r'steps\[0\]: unknown kernel "gemm_xx"')


def test_missing_bundle_file_is_a_bundle_error(runner, tmp_path):
    plan = tiny_plan("cpu")
    plan.tensors[0].init = {"kind": "file", "path": "tensors/missing.f32"}
    e = run_expect(runner, tmp_path, plan, rt.BundleFileError, r"missing\.f32 .*cannot be read")
    assert e.exit_code == rt.ExitCode.BUNDLE


def test_wrong_sized_bundle_file_states_both_sizes(runner, tmp_path):
    plan = tiny_plan("cpu")
    plan.tensors[0].shape = [32]  # the file still holds 16 floats
    run_expect(runner, tmp_path, plan, rt.BundleFileError, "has 64 bytes; the plan needs exactly 128")


def test_missing_kernel_source_is_a_bundle_error(runner, pocl, tmp_path):
    plan = tiny_plan()
    plan.programs[0].source = "k/absent.cl"
    run_expect(runner, tmp_path, plan, rt.BundleFileError, r"absent\.cl")


def test_local_size_above_the_device_maximum_is_refused(runner, pocl, tmp_path):
    plan = tiny_plan(local=[1 << 20])
    plan.steps[0].global_size = [1 << 20]
    run_expect(runner, tmp_path, plan, rt.BadInputError, "exceeds the .*max")


def test_global_size_not_a_multiple_of_local_is_refused(runner, tmp_path):
    run_expect(runner, tmp_path, tiny_plan(local=[5]), rt.BadInputError, "not a multiple of local")


def test_selector_matching_no_device_lists_the_available_ones(runner, tmp_path):
    e = run_expect(runner, tmp_path, tiny_plan(), rt.NoDeviceError, "no OpenCL device matches .*available: ",
                   sel=rt.DeviceSelector(device="no-such-gpu"))
    assert e.exit_code == rt.ExitCode.NO_DEVICE


def test_kernel_syntax_error_prints_compiler_log(runner, pocl, tmp_path):
    bad = FILL_CL.replace("X[i] = value;", "X[i] = value +;")
    e = run_expect(runner, tmp_path, tiny_plan(), rt.KernelBuildError, r'program "fill" .*compiler log',
                   cl_source=bad)
    assert "error" in e.stderr and "expected expression" in e.stderr  # clang's log, via PoCL


def test_infinite_loss_stops_the_run_naming_the_iteration(runner, tmp_path):
    e = run_expect(runner, tmp_path, tiny_plan("cpu", value=3e38), rt.NonFiniteLossError,
                   r'loss tensor "loss" is infinite after iteration 0')
    assert e.exit_code == rt.ExitCode.NONFINITE


def test_transfer_step_on_cpu_backend_is_refused(runner, tmp_path):
    plan = tiny_plan("cpu")
    plan.steps.append(Step(op="d2h", tensor=1))
    run_expect(runner, tmp_path, plan, rt.BadInputError, 'needs backend "opencl"')


def test_unknown_option_missing_plan_and_unknown_mode_are_refused(runner, tmp_path):
    with pytest.raises(rt.BadInputError, match="unknown option --bogus"):
        rt.run_mode(runner, "run", ["--bogus", "1"], timeout_s=30)
    with pytest.raises(rt.BadInputError, match="run needs --plan"):
        rt.run_mode(runner, "run", ["--out", str(tmp_path / "o")], timeout_s=30)
    with pytest.raises(rt.BadInputError, match='unknown mode "fly"'):
        rt.run_mode(runner, "fly", [], timeout_s=30)


@pytest.mark.parametrize("mode, option, value", [("bench-gemm", "--min-time-ms", "20ms"),
                                                  ("bench-peak", "--work-items", "4k")])
def test_bench_mode_refuses_a_malformed_number_naming_the_option(runner, tmp_path, mode, option,
                                                                  value):
    """The bench modes' numbers are checked by the runner's one option parser: a value with
    trailing characters (which atof/atol would read as its numeric prefix) exits 2 with one
    stderr line naming the option and the value, before any output is written."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"backend": "cpu", "cases": []}))
    out = tmp_path / "o"
    args = [str(runner), mode, "--out", str(out), option, value]
    if mode == "bench-gemm":
        args += ["--spec", str(spec)]
    res = subprocess.run(args, capture_output=True, text=True, timeout=30)
    assert res.returncode == 2
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert option in lines[0] and value in lines[0]
    assert not out.exists()


def test_opencl_runtime_error_names_call_and_error(runner, pocl, tmp_path):
    """A launch whose last kernel argument was never set: every OpenCL implementation refuses
    it at the enqueue with CL_INVALID_KERNEL_ARGS (OpenCL 1.2 spec, clEnqueueNDRangeKernel),
    whatever its memory sizes (exit 6)."""
    plan = tiny_plan()
    plan.steps[0].args = plan.steps[0].args[:2]          # fill(n, value, X): X left unset
    e = run_expect(runner, tmp_path, plan, rt.OpenCLRuntimeError,
                   r"clEnqueueNDRangeKernel returned CL_INVALID_KERNEL_ARGS \(-52\) during "
                   r"steps\[0\] \(fill\) of iteration 0")
    assert e.exit_code == rt.ExitCode.CL_RUNTIME


def test_progress_prints_one_line_per_iteration(runner, pocl, tmp_path):
    path = stage(tmp_path / "b", tiny_plan())
    proc = rt.run_mode(runner, "run", ["--plan", str(path), "--root", str(tmp_path / "b"), "--out",
                                       str(tmp_path / "out"), "--progress", *pocl.to_args()], timeout_s=60)
    lines = proc.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("iteration 1/2 wall_ms=") and "loss=1.5" in lines[1]


def test_killed_run_leaves_nothing_complete(runner, pocl, tmp_path):
    """A rerun into a folder holding a complete run removes the old run.json first, so a run
    killed by the timeout leaves no run.json that looks complete."""
    plan = tiny_plan("cpu")
    path = stage(tmp_path / "b", plan)
    out = tmp_path / "out"
    rt.run_plan(runner, path, tmp_path / "b", out)
    assert (out / "run.json").exists() and (out / "trace.csv").exists()
    plan.iterations = 10**6  # about 1 ms each: far past the timeout
    plan.tensors[0].shape, plan.tensors[0].init = [1 << 20], {"kind": "zeros"}
    plan.steps[0].args[0] = plan.steps[1].args[0] = {"i": 1 << 20}
    plan.save(path)
    # 5 s: long enough for a loaded host to start the runner (its first act removes the old
    # run.json), far shorter than the plan
    with pytest.raises(rt.RunnerTimeout, match="timed out after 5 s"):
        rt.run_plan(runner, path, tmp_path / "b", out, timeout_s=5)
    assert not (out / "run.json").exists() and not (out / "trace.csv").exists()


@pytest.mark.parametrize("option", ["--threads", "--resamples", "--max-iterations",
                                    "--power-sample-ms"])
def test_int_option_beyond_a_c_int_is_refused(runner, tmp_path, option):
    """2**32 + 2 would be cut to 2 by a cast to int: the runner exits 2 naming the option and
    its range instead of running another count than it was given."""
    res = subprocess.run([str(runner), "run", "--plan", str(tmp_path / "p.json"), "--out",
                          str(tmp_path / "o"), option, str(2**32 + 2)],
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 2, res.stderr
    assert option in res.stderr and "2147483647" in res.stderr, res.stderr


def _damage_kernel_cache(cache: Path) -> None:
    """Cut every compiled program of a PoCL kernel cache short (a full disk, a killed
    compile): PoCL then aborts on an assertion while it loads one."""
    files = list(cache.rglob("program.bc"))
    assert files, f"PoCL wrote no program.bc under {cache}"
    for f in files:
        f.write_bytes(f.read_bytes()[:1000])


@pytest.mark.parametrize("owned", [False, True])
def test_damaged_pocl_kernel_cache_is_survived_and_named(runner, pocl, tmp_path, monkeypatch,
                                                         capsys, owned):
    """A run that PoCL's damaged kernel cache kills (SIGABRT) is run again with an empty
    cache and completes; the damaged folder is named with what to do (the user's: delete
    it), or removed when it is phonetrain's own."""
    from phonetrain.devices import local
    cache = tmp_path / "kcache"
    if owned:  # the folder phonetrain uses when PoCL's default is not writable
        monkeypatch.delenv("POCL_CACHE_DIR", raising=False)
        monkeypatch.setattr(local, "pocl_cache_env", lambda: {"POCL_CACHE_DIR": str(cache)})
    else:
        monkeypatch.setenv("POCL_CACHE_DIR", str(cache))
    path = stage(tmp_path / "b", tiny_plan())
    rt.run_plan(runner, path, tmp_path / "b", tmp_path / "out1", device_selector=pocl)
    _damage_kernel_cache(cache)
    doc = rt.run_plan(runner, path, tmp_path / "b", tmp_path / "out2", device_selector=pocl)
    assert doc["status"] == "ok"
    err = capsys.readouterr().err
    assert f"runner run was killed by SIGABRT with PoCL's kernel cache {cache}" in err, err
    if owned:
        assert "removed it" in err and not cache.exists(), err
    else:
        assert f"delete that folder (rm -rf {cache})" in err, err


def test_a_crash_with_an_empty_kernel_cache_too_is_not_blamed_on_it(tmp_path, monkeypatch):
    """A runner that dies of SIGABRT whatever its kernel cache is run twice (the second time
    with an empty cache), then its error says the cache is not the cause."""
    monkeypatch.setenv("POCL_CACHE_DIR", str(tmp_path / "kcache"))
    crash = tmp_path / "runner"
    crash.write_text(f"#!/bin/sh\necho \"$POCL_CACHE_DIR\" >> {tmp_path / 'tries'}\n"
                     "kill -ABRT $$\n")
    crash.chmod(0o755)
    r = rt.Runner.local_binary(crash, tmp_path / "root", timeout_s=30)
    with pytest.raises(rt.RunnerSignalError) as e:
        r.run(tmp_path / "plan.json", tmp_path / "out")
    assert "also with an empty PoCL kernel cache (so not a damaged cache)" in e.value.hint
    tries = (tmp_path / "tries").read_text().split()
    assert tries[0] == str(tmp_path / "kcache") and len(tries) == 2 and tries[1] != tries[0]
