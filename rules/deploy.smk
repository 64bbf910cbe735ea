# Deploy stage: push the runner, the plan, its data and (OpenCL) the kernel sources to the
# device's staging root (local folder or adb), skipping files already there unchanged.


def deploy_inputs(wc):
    d = {"runner": f"{R}/build/{wc.device}/runner", "plan": f"{R}/plans/{wc.exp}",
         "data": f"{R}/{MAPS['plan_data'][wc.exp]}",
         "params": f"{R}/runs/{wc.device}/{wc.exp}/params.json"}
    k = exp_kernel(wc.exp)
    if k:
        d["build"] = f"{R}/build/{wc.device}/kernels/{k}/build.json"
        d["sources"] = kernel_sources(type("W", (), {"kernel": k}))
    return d


rule deploy:
    input:
        unpack(deploy_inputs),
    output:
        R + "/deploy/{device}/{exp}.json",
    log:
        R + "/logs/deploy/{device}/{exp}.log",
    shell:
        stage("deploy", "{input.params}", "{output}", R)
