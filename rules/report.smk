# Report stage: summary tables -> report.html (self-contained), report.md and figures/
# (phonetrain.report), then the COMPLETE marker. Report settings come from the `report`
# section of the config; device facts (peak GFLOPS, bandwidth) from conf/device/<name>.yaml,
# passed as params so an edit of the facts reruns the report only.


rule report:
    input:
        **SUMMARY,
        complete=L.summary_complete(),
    params:
        report=SWEEP.root["report"],
        facts=facts(SWEEP),
    output:
        html=L.report_html(),
        md=L.report_md(),
        iteration_time=figure("iteration_time"),
        breakdown=figure("breakdown"),
        gemm_gflops=figure("gemm_gflops"),
        gemm_kernels=figure("gemm_kernels"),
        bandwidth=figure("bandwidth"),
        loss=figure("loss"),
        complete=L.report_complete(),
    log:
        L.log("report", "report"),
    run:
        report_now(output.complete)
