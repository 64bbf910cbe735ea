# Deploy stage: push the runner, the plan, its data and (OpenCL) the kernel sources to the
# device's staging root (local folder or adb), skipping files already there unchanged.


def deploy_inputs(wc):
    d = {"runner": f"{R}/build/{wc.device}/runner", "plan": f"{R}/plans/{wc.exp}",
         "data": f"{R}/{JP['plan'][wc.exp]['data_dir']}"}
    k = exp_kernel(wc.exp)
    if k:
        d["build"] = f"{R}/build/{wc.device}/kernels/{k}/build.json"
        d["sources"] = version_sources(k)
        d["tuning"] = tuning_file(wc.device, k)   # rules/gemm.smk: runs use the tuned config
    return d


rule deploy:
    input:
        unpack(deploy_inputs),
    output:
        R + "/deploy/{device}/{exp}.json",
    params:
        p=lambda wc: as_json(JP["run"][(wc.device, wc.exp)]),
        ddir=lambda wc: JP["plan"][wc.exp]["data_dir"],
    log:
        R + "/logs/deploy/{device}/{exp}.log",
    shell:
        stage("deploy", "{params.p:q}", "{params.ddir:q}", "{output:q}", RQ)
