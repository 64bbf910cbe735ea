"""The workflow's stages, one module per rules/*.smk file: what the rules run.

``build`` (runner and kernel builds), ``gemm`` (tuning, GEMM sweep, peaks), ``deploy`` (the
device's plan and pushes), ``train`` (data, lowering, training, verification and the run's
Perfetto trace), ``profile`` (bandwidth sweep; the Perfetto conversion the train job calls),
``aggregate`` (summary tables and report of a study).
``params`` computes every job's params from the composed sweep, ``job`` is the command line
and file passing of one job, ``single`` chains the stages for ``phonetrain run``.
"""
