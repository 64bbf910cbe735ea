# Data, lowering and training stages.
# data:  a dataset split into per-iteration batch files
# lower: model + batch + backend placement -> plan + tensors (device-independent)
# train: the runner executes the device's plan (warm-up + measured iterations, per-command
#        trace), then the numpy reference verifies it; the same job converts the trace for
#        Perfetto (trace.perfetto.json): three jobs per run, lower, deploy and train
#        (docs/workflow.md, "Jobs per run")


# Jobs that talk to a device stay on the submitting host (its adb server, its locks).
localrules: train


rule data:
    output:
        dir=directory(L.data_dir("{ddir}")),
    params:
        p=lambda wc: as_json(JP["data"][wc.ddir]),
    resources:
        **host_job("data"),
    log:
        L.log("{ddir}"),
    shell:
        stage("train", "data", outputs=["dir"])


ruleorder: data > lower


rule lower:
    output:
        dir=directory(L.plan_dir("{exp}")),
    params:
        p=lambda wc: as_json(JP["plan"][wc.exp]),
    resources:
        **host_job("lower"),
    log:
        L.log("lower", "{exp}"),
    shell:
        stage("train", "lower", outputs=["dir"])


rule train:
    input:
        manifest=L.deploy_manifest("{device}", "{exp}"),
        plan=L.run_file("{device}", "{exp}", layout.PLAN),
        plan_dir=L.plan_dir("{exp}"),
        data=lambda wc: L.data_dir(JP["plan"][wc.exp]["data_dir"]),
    output:
        run=L.run_file("{device}", "{exp}", layout.RUN),
        trace=L.run_file("{device}", "{exp}", layout.TRACE),
        verify=L.run_file("{device}", "{exp}", layout.VERIFY),
        perfetto=L.run_file("{device}", "{exp}", layout.PERFETTO),
    params:
        p=lambda wc: as_json(JP["run"][(wc.device, wc.exp)]),
        expect=expect_inputs,
    resources:
        **device_job(schedule.TRAIN, "train"),
    log:
        L.log("train", "{device}", "{exp}"),
    shell:
        stage("train", "train", inputs=["manifest", "plan", "plan_dir", "data"],
              outputs=["run", "trace", "verify", "perfetto"])
