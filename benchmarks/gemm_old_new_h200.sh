#!/bin/bash
# tiled GEMM before and after a change, CLBlast and cuBLAS, in one lease of a device machine
# (the `run` tool: repository root as working directory, results under $OUT). Squares 1024,
# 2048, 4096 tuned (--tune, every candidate printed by --per-candidate), then 4096 again for
# both trees. Prepare on the host, in git-ignored .whl/ (carried with `carry: [".whl"]`):
#   mkdir -p .whl/base && git archive OLD_COMMIT src benchmarks pyproject.toml | tar -x -C .whl/base
#   cp benchmarks/bench_gemm.py .whl/base/benchmarks/      # for --per-candidate
#   mkdir -p .whl/clblast && cp /usr/lib/x86_64-linux-gnu/libclblast.so.1.5.3 .whl/clblast/libclblast.so.1
# plus the project's wheels in .whl/*.whl when the machine's python3 lacks numpy/pandas/PyYAML.
# cuBLAS comes from the machine's own PyTorch (benchmarks/bench_cublas.py). About 4-5 minutes.
set -x
BASE=${BASE:-.whl/base}
git log -1 --oneline 2>&1; date -u; uptime
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
P=python3
if ! $P -c "import numpy, pandas, yaml" 2>/dev/null; then
  rm -rf /tmp/venv && python3 -m venv /tmp/venv &&
    python3 -c "import site; print(site.getsitepackages()[0])" \
      > /tmp/venv/lib/python3.12/site-packages/sys.pth &&
    /tmp/venv/bin/pip install -q --no-index --no-deps --no-compile .whl/*.whl
  P=/tmp/venv/bin/python
fi
export LD_LIBRARY_PATH=$PWD/.whl/clblast:$LD_LIBRARY_PATH
A="--platform NVIDIA --device-type gpu --no-mlp --no-peaks --tune --min-time-ms 100 --repeats 5"
A="$A --per-candidate"
timeout 70 $P benchmarks/bench_cublas.py --sizes 1024,2048,4096 > $OUT/cublas.md 2>&1
timeout 70 $P $BASE/benchmarks/bench_gemm.py $A --sizes 1024,2048,4096 --versions tiled,clblast \
  > $OUT/old1.md 2> $OUT/old1.err
timeout 110 $P benchmarks/bench_gemm.py $A --sizes 1024,2048,4096 --versions tiled,clblast \
  > $OUT/new1.md 2> $OUT/new1.err
uptime
timeout 25 $P $BASE/benchmarks/bench_gemm.py $A --sizes 4096 --versions tiled \
  > $OUT/old2.md 2> $OUT/old2.err
timeout 35 $P benchmarks/bench_gemm.py $A --sizes 4096 --versions tiled,clblast \
  > $OUT/new2.md 2> $OUT/new2.err
uptime; date -u
tail -n 5 $OUT/*.md
