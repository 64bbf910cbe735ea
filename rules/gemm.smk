# GEMM study: the models' GEMM shapes (one small file, gemm_shapes: the list is too large for
# a param; tune and gemm take its hash as a param), per-device tuning of the tunable kernel
# versions (a build-stage job whose tuning.json the runs' plans use), the GEMM sweep per
# device x version (+ the runner's CPU backend) on the models' GEMM shapes and square
# sizes, and each device's peaks (roofline).


rule gemm_shapes:
    output:
        shapes=L.gemm_shapes(),
    params:
        p=as_json(JP["shapes"]),
    log:
        L.log("gemm_shapes"),
    shell:
        stage("gemm", "gemm-shapes", outputs=["shapes"])


rule tune:
    input:
        runner=L.runner("{device}"),
        sources=kernel_sources,
        shapes=L.gemm_shapes(),
    output:
        tuning=L.tuning("{device}", "{kernel}"),
    params:
        p=lambda wc: as_json(gemm_job(JP, wc.device, wc.kernel)),
    log:
        L.log("tune", "{device}", "{kernel}"),
    shell:
        stage("gemm", "tune", inputs=["runner", "sources", "shapes"], outputs=["tuning"])


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
        stage("gemm", "gemm", inputs=["runner", "sources", "tuning", "shapes"],
              outputs=["gemm"])


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
