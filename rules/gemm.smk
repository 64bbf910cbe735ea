# GEMM study: the models' GEMM shapes (one small file, gemm_shapes: the list is too large for
# a param; gemm takes its hash as a param), per-device tuning of the tunable kernel versions,
# the GEMM sweep per device x version (+ the runner's CPU backend) on the models' GEMM shapes
# and square sizes, and each device's peaks (roofline).
#
# Tuning is kept per shape class (phonetrain.kernels.tuning): `tune` writes one file per
# device x version x class, `tuning/<class>.json`, where a class is one GEMM call
# (`gemm_nt_32x256x784`) and its params name only that class, never the sweep; a run's deploy
# takes the files of its own plan's classes (common.smk: tuning_files). Adding a model thus
# adds class files and reruns nothing of the runs already measured. `tune_squares` tunes the
# GEMM sweep's square sizes (`tuning/squares.json`); only the `gemm` rule reads it, with
# every class of the sweep's models.


# Jobs that talk to a device stay on the submitting host (its adb server, its locks).
localrules: tune, tune_squares, gemm, peaks


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


rule tune:
    input:
        runner=L.runner("{device}"),
        sources=kernel_sources,
        build=L.kernel_build("{device}", "{kernel}"),  # tune only what compiles
    output:
        tuning=L.tuning("{device}", "{kernel}", "{cls}"),
    wildcard_constraints:
        cls=tuning.CLASS_PATTERN,
    params:
        p=lambda wc: as_json(tune_job(JP, wc.device, wc.kernel, wc.cls)),
        expect=expect_inputs,
    resources:
        **device_job(schedule.MEASURE, "tune"),
    log:
        L.log("tune", "{device}", "{kernel}", "{cls}"),
    shell:
        stage("gemm", "tune", inputs=["runner", "sources"], outputs=["tuning"])


rule tune_squares:
    input:
        runner=L.runner("{device}"),
        sources=kernel_sources,
        build=L.kernel_build("{device}", "{kernel}"),  # tune only what compiles
    output:
        tuning=L.tuning("{device}", "{kernel}", tuning.SQUARES),
    params:
        p=lambda wc: as_json(squares_job(JP, wc.device, wc.kernel)),
        expect=expect_inputs,
    resources:
        **device_job(schedule.MEASURE, "tune_squares"),
    log:
        L.log("tune_squares", "{device}", "{kernel}"),
    shell:
        stage("gemm", "tune_squares", inputs=["runner", "sources"], outputs=["tuning"])


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
