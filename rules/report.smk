# Report stage (skeleton by D1, body by D2): summary tables -> results/report/report.html
# (self-contained), report.md and figures/ (phonetrain.report.build_report). Report settings
# come from the `report` section of conf/config.yaml; device facts (peak GFLOPS, bandwidth)
# from conf/device/<name>.yaml (FACTS: one dict per device, passed as params so an edit of
# the facts reruns the report only).
REPORT_FILES = [f"{R}/report/report.html", f"{R}/report/report.md", REPORT_COMPLETE]
FACTS = [{"device": d, **SWEEP.members["device"][d]["facts"]} for d in SWEEP.devices]


FIG_EXT = SWEEP.root["report"]["figure_format"]


def figure(name):
    """One report figure, declared with Snakemake's report() and its caption
    (rules/captions/<name>.rst) so `snakemake --report` shows it."""
    return report(f"{R}/report/figures/{name}.{FIG_EXT}", caption=f"captions/{name}.rst",
                  category="Figures")


def report_now():
    """Write the report from the summary tables (also used by the partial report)."""
    import importlib  # `report` is a Snakemake keyword: import the module by name

    rep = SWEEP.root["report"]
    importlib.import_module("phonetrain.report").build_report(
        f"{R}/summary", f"{R}/report", title=rep["title"],
        paper_reference=rep["paper_reference"], figure_format=rep["figure_format"],
        dpi=rep["dpi"], facts=FACTS)


rule report:
    input:
        summary=SUMMARY,
        complete=SUMMARY_COMPLETE,
    params:
        report=SWEEP.root["report"],
        facts=FACTS,
    output:
        html=R + "/report/report.html",
        md=R + "/report/report.md",
        iteration_time=figure("iteration_time"),
        breakdown=figure("breakdown"),
        gemm_gflops=figure("gemm_gflops"),
        gemm_kernels=figure("gemm_kernels"),
        bandwidth=figure("bandwidth"),
        loss=figure("loss"),
        complete=REPORT_COMPLETE,
    run:
        report_now()
        mark_complete(output.complete)
