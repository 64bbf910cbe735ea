# Build stage: the runner per device, then each kernel version on each device (the runner's
# `build` mode on the device's own OpenCL compiler: log, build time, binary size).


rule build_runner:
    input:
        sources=RUNNER_SOURCES,
        params=R + "/build/{device}/params.json",
    output:
        R + "/build/{device}/runner",
    log:
        R + "/logs/build_runner/{device}.log",
    shell:
        stage("build-runner", "{input.params}", "{output}")


rule build_kernels:
    input:
        runner=R + "/build/{device}/runner",
        sources=kernel_sources,
        params=R + "/build/{device}/kernels/{kernel}/params.json",
    output:
        R + "/build/{device}/kernels/{kernel}/build.json",
    log:
        R + "/logs/build_kernels/{device}/{kernel}.log",
    shell:
        stage("build-kernels", "{input.params}", "{output}", R)
