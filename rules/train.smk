# Data, lowering and training stages.
# data:  a dataset split into per-iteration batch files        results/data/<dataset>/b<batch>/
# lower: model + batch + backend placement -> plan + tensors   results/plans/<experiment id>/
# train: the runner executes the plan on the device (warm-up + measured iterations, per-
#        command trace), then the numpy reference verifies it   results/runs/<device>/<id>/


rule data:
    output:
        directory(R + "/{ddir}"),
    wildcard_constraints:
        ddir="data/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+",
    params:
        p=lambda wc: as_json(JP["data"][wc.ddir]),
    log:
        R + "/logs/{ddir}.log",
    shell:
        stage("data", "{params.p:q}", RQ)


ruleorder: data > lower


rule lower:
    output:
        directory(R + "/plans/{exp}"),
    params:
        p=lambda wc: as_json(JP["plan"][wc.exp]),
    log:
        R + "/logs/lower/{exp}.log",
    shell:
        stage("lower", "{params.p:q}", RQ)


rule train:
    input:
        deployed=R + "/deploy/{device}/{exp}.json",
        plan=R + "/plans/{exp}",
    output:
        run=R + "/runs/{device}/{exp}/run.json",
        trace=R + "/runs/{device}/{exp}/trace.csv",
        verify=R + "/runs/{device}/{exp}/verify.json",
    params:
        p=lambda wc: as_json(JP["run"][(wc.device, wc.exp)]),
    log:
        R + "/logs/train/{device}/{exp}.log",
    shell:
        stage("train", "{params.p:q}", RQ, str(TIMEOUT_S), json.dumps(PROGRESS))
