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
        **{name: figure(name) for name in FIGURES},   # phonetrain.report.registry
        **{f"{name}_alt": figure_alt(name) for name in FIGURES},
        complete=L.report_complete(),
    resources:
        **host_job("report"),
    log:
        L.log("report", "report"),
    run:
        consumer_check(input)
        in_snakemake("report", log[0], lambda: report_now(output.complete))
        write_stamp(output.complete, params_stamp(REPORT_PARAMS))
