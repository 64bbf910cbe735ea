# Build stage: the runner per device, then each kernel version on each device (the runner's
# `build` mode on the device's own OpenCL compiler: log, build time, binary size).


rule build_runner:
    input:
        sources=RUNNER_SOURCES,
    output:
        R + "/build/{device}/runner",
    params:
        p=lambda wc: as_json(JP["device"][wc.device]),
    log:
        R + "/logs/build_runner/{device}.log",
    shell:
        stage("build-runner", "{params.p:q}", "{output:q}")


rule build_kernels:
    input:
        runner=R + "/build/{device}/runner",
        sources=lambda wc: version_sources(wc.kernel),
    output:
        R + "/build/{device}/kernels/{kernel}/build.json",
    params:
        p=lambda wc: as_json(JP["kernel"][(wc.device, wc.kernel)]),
    log:
        R + "/logs/build_kernels/{device}/{kernel}.log",
    shell:
        stage("build-kernels", "{params.p:q}", "{output:q}", RQ, str(TIMEOUT_S))
