# Deploy stage: the plan made for the device (the device's tuned GEMM configuration applied:
# the plan that runs and is verified, kept in the run folder), then the runner, the plan, its
# data and (OpenCL) the kernel sources pushed to the device's staging root, skipping files
# already there unchanged.


# Jobs that talk to a device stay on the submitting host (its adb server, its locks).
localrules: deploy


rule deploy:
    input:
        unpack(deploy_inputs),
    output:
        manifest=L.deploy_manifest("{device}", "{exp}"),
        plan=L.run_file("{device}", "{exp}", layout.PLAN),
    params:
        p=lambda wc: as_json(JP["run"][(wc.device, wc.exp)]),
        expect=expect_inputs,
    resources:
        **device_job(schedule.HOST, "deploy"),
    log:
        L.log("deploy", "{device}", "{exp}"),
    shell:
        stage("deploy", "deploy", inputs=["runner", "plan_dir", "data", "sources", "tuning"],
              outputs=["manifest", "plan"])
