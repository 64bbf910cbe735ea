# Report stage: summary tables -> report.html (self-contained), report.md and figures/
# (phonetrain.report): each figure in the configured format, declared with its caption for
# `snakemake --report`, and the other format beside it (SVG beside PNG); then the COMPLETE
# marker. Report settings come from the `report` section of the config; device facts (peak
# GFLOPS, bandwidth) from conf/device/<name>.yaml, passed as params so an edit of the facts
# reruns the report only.


rule report:
    input:
        **SUMMARY,
        complete=L.summary_complete(),
    params:
        report=REPORT_PARAMS["report"],
        facts=REPORT_PARAMS["facts"],
    output:
        html=L.report_html(),
        md=L.report_md(),
        iteration_time=figure("iteration_time"),
        breakdown=figure("breakdown"),
        gemm_gflops=figure("gemm_gflops"),
        gemm_kernels=figure("gemm_kernels"),
        bandwidth=figure("bandwidth"),
        loss=figure("loss"),
        accuracy=figure("accuracy"),
        batch_sweep=figure("batch_sweep"),
        energy=figure("energy"),
        memory_roles=figure("memory_roles"),
        iteration_time_alt=figure_alt("iteration_time"),
        breakdown_alt=figure_alt("breakdown"),
        gemm_gflops_alt=figure_alt("gemm_gflops"),
        gemm_kernels_alt=figure_alt("gemm_kernels"),
        bandwidth_alt=figure_alt("bandwidth"),
        loss_alt=figure_alt("loss"),
        accuracy_alt=figure_alt("accuracy"),
        batch_sweep_alt=figure_alt("batch_sweep"),
        energy_alt=figure_alt("energy"),
        memory_roles_alt=figure_alt("memory_roles"),
        complete=L.report_complete(),
    resources:
        **host_job("report"),
    log:
        L.log("report", "report"),
    run:
        consumer_check(input)
        in_snakemake("report", log[0], lambda: report_now(output.complete))
        write_stamp(output.complete, params_stamp(REPORT_PARAMS))
