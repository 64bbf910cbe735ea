# Profile stage: the host<->device bandwidth sweep per device (runner bench-bandwidth), and
# per run the Chrome/Perfetto trace of its commands (phonetrain.profiling, D2's code).


rule bandwidth:
    input:
        runner=R + "/build/{device}/runner",
    output:
        R + "/bandwidth/{device}/bandwidth.csv",
    params:
        p=lambda wc: JP["bandwidth"][wc.device],
    log:
        R + "/logs/bandwidth/{device}.log",
    run:
        X.job("bandwidth", log[0], params.p, output[0], R, TIMEOUT_S)


rule perfetto:
    input:
        run=R + "/runs/{device}/{exp}/run.json",
        trace=R + "/runs/{device}/{exp}/trace.csv",
    output:
        R + "/runs/{device}/{exp}/trace.perfetto.json",
    run:
        from phonetrain import aggregate, profiling

        tr = profiling.read_trace_csv(input.trace)
        it = aggregate.run_iterations(aggregate.read_json(input.run), input.run)
        profiling.write_json_atomic(
            profiling.perfetto_trace(tr, it, title=wildcards.exp, device=wildcards.device),
            output[0])
