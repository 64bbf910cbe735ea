# Profile stage: the host<->device bandwidth sweep per device (runner bench-bandwidth), and
# per run the Chrome/Perfetto trace of its commands (phonetrain.results.profiling).


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


rule perfetto:
    input:
        run=L.run_file("{device}", "{exp}", layout.RUN),
        trace=L.run_file("{device}", "{exp}", layout.TRACE),
    output:
        json=L.run_file("{device}", "{exp}", layout.PERFETTO),
    params:
        p=lambda wc: as_json({"device": wc.device, "title": wc.exp}),
        expect=expect_inputs,
    resources:
        **host_job("perfetto"),
    log:
        L.log("perfetto", "{device}", "{exp}"),
    shell:
        stage("profile", "perfetto", inputs=["run", "trace"], outputs=["json"])
