# Aggregate stage (skeleton by D1, body by D2): raw outputs -> results/summary/*.parquet
# with the schemas of phonetrain.results.schema. Inputs: every run folder of the sweep (params.json
# + runner outputs + verify.json), every device's bandwidth CSV, every kernel build.json.
from phonetrain.results.schema import TABLES

SUMMARY = [f"{R}/summary/{t}.parquet" for t in TABLES]
RUN_DIRS = [f"{R}/runs/{e.device}/{e.id}" for e in EXPERIMENTS]
BANDWIDTH = [f"{R}/bandwidth/{d}/bandwidth.csv" for d in SWEEP.devices]
BUILDS = [f"{R}/build/{d}/kernels/{k}/build.json" for d in SWEEP.devices for k in SWEEP.kernels
          if any(e.kernel == k and e.device == d for e in EXPERIMENTS)]


def aggregate_now():
    """Aggregate whatever exists (also used by the partial report on a failed workflow)."""
    from phonetrain.results.aggregate import aggregate

    X.mark_missing_runs(R, JP)
    aggregate(RUN_DIRS, f"{R}/summary",
              bandwidth_csvs=[p for p in BANDWIDTH if Path(p).exists()],
              build_jsons=[p for p in BUILDS if Path(p).exists()],
              gemm_jsons=[p for p in GEMM_FILES if Path(p).exists()],
              peaks_jsons=[p for p in PEAKS_FILES if Path(p).exists()])


rule aggregate:
    input:
        runs=[f for e in EXPERIMENTS for f in run_files(e, ("run.json", "trace.csv",
              "verify.json", "trace.perfetto.json"))],
        bandwidth=BANDWIDTH,
        builds=BUILDS,
        gemm=GEMM_FILES,
        peaks=PEAKS_FILES,
    output:
        SUMMARY,
        complete=SUMMARY_COMPLETE,
    run:
        aggregate_now()
        mark_complete(output.complete)
