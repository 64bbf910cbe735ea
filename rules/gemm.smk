# GEMM study (issue 6): per-device tuning of the optimized kernel versions (a build-stage job
# whose tuning.json the runs' deploy uses), the GEMM sweep per device x version (+ the runner's
# CPU backend) on the models' GEMM shapes and square sizes, and each device's peaks (roofline).
# Bodies: phonetrain.gemm_stages; settings reach the jobs as Snakemake params (a change reruns
# exactly the jobs that depend on it).
from phonetrain import gemm_stages as G

X.STAGES.update(G.STAGES)
GEMM_P = G.gemm_params(SWEEP)
GEMM_VERSIONS = list(SWEEP.kernels) + [G.CPU]
GEMM_FILES = [f"{R}/gemm/{d}/{v}.json" for d in SWEEP.devices for v in GEMM_VERSIONS]
PEAKS_FILES = [f"{R}/peaks/{d}.json" for d in SWEEP.devices]
TIMEOUT_S = SWEEP.root["measure"]["timeout_s"]


def tuning_file(device, kernel):
    """The tuning.json a version's runs and GEMM sweep use on a device ([] if untunable)."""
    if kernel and kernel != G.CPU and G.tunable(kernel):
        return [f"{R}/build/{device}/kernels/{kernel}/tuning.json"]
    return []


rule tune:
    input:
        runner=R + "/build/{device}/runner",
        sources=kernel_sources,
    output:
        R + "/build/{device}/kernels/{kernel}/tuning.json",
    params:
        p=lambda wc: G.kernel_params(SWEEP, wc.device, wc.kernel),
        gemm=GEMM_P,
    log:
        R + "/logs/tune/{device}/{kernel}.log",
    run:
        X.job("tune", log[0], params.p, params.gemm, output[0], R, TIMEOUT_S)


def gemm_inputs(wc):
    d = {"runner": f"{R}/build/{wc.device}/runner", "tuning": tuning_file(wc.device, wc.version)}
    if wc.version != G.CPU:
        d["sources"] = version_sources(wc.version)
    return d


rule gemm:
    input:
        unpack(gemm_inputs),
    output:
        R + "/gemm/{device}/{version}.json",
    params:
        p=lambda wc: G.device_params(SWEEP, wc.device),
        gemm=GEMM_P,
    log:
        R + "/logs/gemm/{device}/{version}.log",
    wildcard_constraints:
        version="[A-Za-z0-9_-]+",
    run:
        X.job("gemm", log[0], params.p, params.gemm, wildcards.version, output[0], R,
              input.tuning[0] if input.tuning else None, TIMEOUT_S)


rule peaks:
    input:
        runner=R + "/build/{device}/runner",
    output:
        R + "/peaks/{device}.json",
    params:
        p=lambda wc: G.device_params(SWEEP, wc.device),
    log:
        R + "/logs/peaks/{device}.log",
    run:
        X.job("peaks", log[0], params.p, output[0], R, TIMEOUT_S)
