# GEMM study: per-device tuning of the tunable kernel versions (a build-stage job whose
# tuning.json the runs' plans use), the GEMM sweep per device x version (+ the runner's CPU
# backend) on the models' GEMM shapes and square sizes, and each device's peaks (roofline).


rule tune:
    input:
        runner=L.runner("{device}"),
        sources=kernel_sources,
    output:
        tuning=L.tuning("{device}", "{kernel}"),
    params:
        p=lambda wc: as_json({**JP["kernel"][(wc.device, wc.kernel)], **JP["gemm"]}),
    log:
        L.log("tune", "{device}", "{kernel}"),
    shell:
        stage("gemm", "tune", inputs=["runner", "sources"], outputs=["tuning"])


rule gemm:
    input:
        unpack(gemm_inputs),
    output:
        gemm=L.gemm("{device}", "{version}"),
    params:
        p=gemm_job_params,
    log:
        L.log("gemm", "{device}", "{version}"),
    shell:
        stage("gemm", "gemm", inputs=["runner", "sources", "tuning"], outputs=["gemm"])


rule peaks:
    input:
        runner=L.runner("{device}"),
    output:
        peaks=L.peaks("{device}"),
    params:
        p=lambda wc: as_json(JP["device"][wc.device]),
    log:
        L.log("peaks", "{device}"),
    shell:
        stage("gemm", "peaks", inputs=["runner"], outputs=["peaks"])
