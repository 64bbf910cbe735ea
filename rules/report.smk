# Report stage (skeleton by D1, body by D2): summary tables -> results/report/report.html
# (self-contained), report.md and figures/. Device facts (peak GFLOPS, bandwidth) come from
# results/config/facts/<device>.json; the sweep and report settings from config/sweep.json.
REPORT_FILES = [f"{R}/report/report.html", f"{R}/report/report.md"]
FACTS = [f"{R}/config/facts/{d}.json" for d in SWEEP.devices]


def report_now():
    """Write the report from the summary tables (also used by the partial report)."""
    import importlib  # `report` is a Snakemake keyword: import the module by name

    importlib.import_module("phonetrain.report").write_report(f"{R}/summary", f"{R}/report", facts=FACTS,
                        sweep=f"{R}/config/sweep.json")


rule report:
    input:
        summary=SUMMARY,
        facts=FACTS,
        sweep=R + "/config/sweep.json",
    output:
        html=R + "/report/report.html",
        md=R + "/report/report.md",
        figures=report(directory(R + "/report/figures"), patterns=["{name}.png"],
                       caption="../docs/report-figures.rst", category="figures"),
    run:
        report_now()
