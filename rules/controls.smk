# Controls stage: a device's record that makes its control subjects (its CPU-backend runs
# and CPU GEMM sweep) measure again whenever the kernel sources or plans of its other
# measuring jobs changed, so a rerun after an edit gauges the host's drift on subjects
# nothing changed for (phonetrain.stages.controls, phonetrain.report.drift).


rule controls:
    input:
        unpack(control_inputs),
    output:
        record=L.controls("{device}"),
    params:
        p=lambda wc: as_json(CONTROLS[wc.device]),
    resources:
        **HOST_JOB,
    log:
        L.log("controls", "{device}"),
    shell:
        stage("controls", "controls", outputs=["record"])
