# Build stage: the runner per device, then each kernel version on each device (the runner's
# `build` mode on the device's own OpenCL compiler: log, build time, binary size).


# Jobs that talk to a device stay on the submitting host (its adb server, its locks).
localrules: build_kernels


rule build_runner:
    input:
        sources=RUNNER_SOURCES,
    output:
        runner=L.runner("{device}"),
    params:
        p=lambda wc: as_json(JP["runner"][wc.device]),
    resources:
        **host_job("build_runner"),
    log:
        L.log("build_runner", "{device}"),
    shell:
        stage("build", "build-runner", outputs=["runner"])


rule build_kernels:
    input:
        runner=L.runner("{device}"),
        sources=kernel_sources,
    output:
        build=L.kernel_build("{device}", "{kernel}"),
    params:
        p=lambda wc: as_json(JP["kernel"][(wc.device, wc.kernel)]),
        expect=expect_inputs,
    resources:
        **device_job(schedule.DEVICE, "build_kernels"),
    log:
        L.log("build_kernels", "{device}", "{kernel}"),
    shell:
        stage("build", "build-kernels", inputs=["runner", "sources"], outputs=["build"])
