# Profile stage: the host<->device bandwidth sweep per device (runner bench-bandwidth), and
# per run the Chrome/Perfetto trace of its commands (phonetrain.results.profiling, D2's code).


rule bandwidth:
    input:
        runner=R + "/build/{device}/runner",
    output:
        R + "/bandwidth/{device}/bandwidth.csv",
    params:
        p=lambda wc: as_json(JP["bandwidth"][wc.device]),
    log:
        R + "/logs/bandwidth/{device}.log",
    shell:
        stage("bandwidth", "{params.p:q}", "{output:q}", RQ, str(TIMEOUT_S))


rule perfetto:
    input:
        run=R + "/runs/{device}/{exp}/run.json",
        trace=R + "/runs/{device}/{exp}/trace.csv",
    output:
        R + "/runs/{device}/{exp}/trace.perfetto.json",
    log:
        R + "/logs/perfetto/{device}/{exp}.log",
    shell:
        stage("perfetto", "{input.run:q}", "{input.trace:q}", "{output:q}", "{wildcards.device}",
              "{wildcards.exp}")
