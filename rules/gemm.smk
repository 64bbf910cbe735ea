# GEMM study: the models' GEMM shapes (one small file, gemm_shapes: the list is too large for
# a param; gemm takes its hash as a param), per-device tuning of the tunable kernel versions,
# the GEMM sweep per device x version (+ the runner's CPU backend) on the models' GEMM shapes
# and square sizes, and each device's peaks (roofline).
#
# Tuning is kept per shape class (phonetrain.kernels.tuning): one file per device x version x
# class, `tuning/<class>.json`, where a class is one GEMM call (`gemm_nt_32x256x784`) and the
# settings the file records name only that class, never the sweep; a run's deploy takes the
# files of its own plan's classes (common.smk: tuning_files). Adding a model thus adds class
# files and reruns nothing of the runs already measured. `tuning/squares.json` holds the GEMM
# sweep's square sizes; only the `gemm` rule reads it, with every class of the sweep's models.


# Jobs that talk to a device stay on the submitting host (its adb server, its locks).
localrules: gemm, peaks


rule gemm_shapes:
    output:
        shapes=L.gemm_shapes(),
    params:
        p=as_json(JP["shapes"]),
    resources:
        **host_job("gemm_shapes"),
    log:
        L.log("gemm_shapes"),
    shell:
        stage("gemm", "gemm-shapes", outputs=["shapes"])


# One tune job per device x tunable version (rule tune_<version>, its log
# logs/tune/<device>/<version>.log) tunes every class of that version: its outputs are the
# class files and squares.json, flagged update() so Snakemake leaves them in place while the
# job runs, and the job keeps every file that already records its class's settings and this
# runner untouched (phonetrain.stages.gemm.tune_version). A deploy takes its class files as
# ancient(), so a tune job that reruns because the study gained classes reruns no deploy
# whose files exist; a class that must be tuned again (other settings or sources) is moved
# aside at the workflow's start, so its deploys rerun for the missing file.
for _kernel, _classes in VERSION_CLASSES.items():

    rule:
        name:
            tune_rule(_kernel)
        localrule: True
        input:
            runner=L.runner("{device}"),
            sources=version_sources(_kernel),
            build=L.kernel_build("{device}", _kernel),  # tune only what compiles
        output:
            tuning=[update(L.tuning("{device}", _kernel, c)) for c in _classes],
            squares=update(L.tuning("{device}", _kernel, tuning.SQUARES)),
        params:
            p=tune_params(_kernel),
            expect=expect_inputs,
        resources:
            **device_job(schedule.MEASURE, "tune"),
        log:
            L.log("tune", "{device}", _kernel),
        shell:
            stage("gemm", "tune-version", inputs=["runner", "sources"],
                  outputs=["tuning", "squares"])


# The same per device x version whose Vulkan shaders have tuning candidates (rule
# tune_vulkan_<version>, log logs/tune/<device>/<version>.vulkan.log): the classes of its
# Vulkan runs' plans, timed on the device's Vulkan device (phonetrain.stages.vk_bench), one
# file each under build/<device>/spirv/<version>/tuning/ (squares.json without classes: no
# GEMM sweep runs on Vulkan). Inputs: the runner and the version's shader files.
for _kernel, _classes in VK_VERSION_CLASSES.items():

    rule:
        name:
            vk_tune_rule(_kernel)
        localrule: True
        input:
            runner=L.runner("{device}"),
            sources=[rel(p) for p in COMPOSED.shader_files[_kernel]],
        output:
            tuning=[update(L.vk_tuning("{device}", _kernel, c)) for c in _classes],
            squares=update(L.vk_tuning("{device}", _kernel, tuning.SQUARES)),
        params:
            p=vk_tune_params(_kernel),
            expect=expect_inputs,
        resources:
            **device_job(schedule.MEASURE, "tune"),
        log:
            L.log("tune", "{device}", f"{_kernel}.vulkan"),
        shell:
            stage("gemm", "tune-version", inputs=["runner", "sources"],
                  outputs=["tuning", "squares"])


rule gemm:
    input:
        unpack(gemm_inputs),
    output:
        gemm=L.gemm("{device}", "{kernel}"),
    params:
        p=gemm_job_params,
        expect=expect_inputs,
    resources:
        **device_job(schedule.MEASURE, "gemm"),
    log:
        L.log("gemm", "{device}", "{kernel}"),
    shell:
        stage("gemm", "gemm", inputs=["runner", "sources", "tuning", "shapes"],
              outputs=["gemm"])


rule peaks:
    input:
        runner=L.runner("{device}"),
    output:
        peaks=L.peaks("{device}"),
    params:
        p=lambda wc: as_json(JP["device"][wc.device]),
        expect=expect_inputs,
    resources:
        **device_job(schedule.MEASURE, "peaks"),
    log:
        L.log("peaks", "{device}"),
    shell:
        stage("gemm", "peaks", inputs=["runner"], outputs=["peaks"])
