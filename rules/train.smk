# Data, lowering and training stages.
# data:  a dataset split into per-iteration batch files        results/data/<dataset>/b<batch>/
# lower: model + batch + backend placement -> plan + tensors   results/plans/<experiment id>/
# train: the runner executes the plan on the device (warm-up + measured iterations, per-
#        command trace), then the numpy reference verifies it   results/runs/<device>/<id>/


rule data:
    input:
        params=R + "/config/{ddir}.json",
    output:
        directory(R + "/{ddir}"),
    wildcard_constraints:
        ddir="data/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+",
    log:
        R + "/logs/{ddir}.log",
    shell:
        stage("data", "{input.params}", R)


ruleorder: data > lower


rule lower:
    input:
        params=R + "/config/plans/{exp}.json",
    output:
        directory(R + "/plans/{exp}"),
    log:
        R + "/logs/lower/{exp}.log",
    shell:
        stage("lower", "{input.params}", R)


rule train:
    input:
        params=R + "/runs/{device}/{exp}/params.json",
        deployed=R + "/deploy/{device}/{exp}.json",
        plan=R + "/plans/{exp}",
    output:
        run=R + "/runs/{device}/{exp}/run.json",
        trace=R + "/runs/{device}/{exp}/trace.csv",
        verify=R + "/runs/{device}/{exp}/verify.json",
    log:
        R + "/logs/train/{device}/{exp}.log",
    shell:
        stage("train", "{input.params}", R)
