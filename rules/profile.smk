# Profile stage: the host<->device bandwidth sweep per device (runner bench-bandwidth). Each
# run's Chrome/Perfetto trace of its commands is written by its train job (rules/train.smk;
# phonetrain.stages.profile.write_perfetto).


# Jobs that talk to a device stay on the submitting host (its adb server, its locks).
localrules: bandwidth


rule bandwidth:
    input:
        runner=L.runner("{device}"),
    output:
        bench=L.bandwidth_bench("{device}"),
        csv=L.bandwidth("{device}"),
    params:
        p=lambda wc: as_json(JP["bandwidth"][wc.device]),
        expect=expect_inputs,
    resources:
        **device_job(schedule.MEASURE, "bandwidth"),
    log:
        L.log("bandwidth", "{device}"),
    shell:
        stage("profile", "bandwidth", inputs=["runner"], outputs=["csv", "bench"])
