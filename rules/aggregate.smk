# Aggregate stage: every run folder of the sweep, every device's bandwidth sweep, kernel
# builds, GEMM sweeps and peaks -> the summary tables (phonetrain.results.schema; devices:
# one row per device, its phone and OpenCL facts from the run folders), then the
# COMPLETE marker. The same function writes the partial summary after a failure and serves
# `phonetrain aggregate`.


rule aggregate:
    input:
        runs=run_outputs(layout.RUN) + run_outputs(layout.TRACE) + run_outputs(layout.VERIFY)
        + run_outputs(layout.PERFETTO),
        bandwidth=EXPECTED["bandwidth"],
        builds=EXPECTED["builds"],
        gemm=EXPECTED["gemm"],
        peaks=EXPECTED["peaks"],
    params:
        schema=AGGREGATE_PARAMS["schema"],  # tables of another phonetrain are rewritten
    output:
        **SUMMARY,
        complete=L.summary_complete(),
    resources:
        **host_job("aggregate"),
    log:
        L.log("aggregate", "summary"),
    run:
        consumer_check(input)
        in_snakemake("aggregate", log[0], lambda: aggregate_now(output.complete))
        write_stamp(output.complete, params_stamp(AGGREGATE_PARAMS))
