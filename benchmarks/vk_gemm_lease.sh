#!/usr/bin/env bash
# One lease of a lent NVIDIA machine for the Vulkan GEMM against cuBLAS FP32 at 1024/2048/4096
# squares (docs/benchmarks.md's GEMM question; goal: tiled >= 50% of cuBLAS at 4096), every
# step in its own `timeout` so one slow step cannot cost the others, every result under $OUT
# as it completes (about 2-3 minutes in all):
#   cublas.json   cuBLAS FP32 (torch.matmul, TF32 off; bench_cublas.py --json)
#   vk_gemm.json  baseline and tiled gemm_nn on NVIDIA's Vulkan driver, tiled with every
#                 candidate of src/kernels/tiled/vk/tuning.yaml, each result checked against
#                 numpy (bench_vk_gemm.py --json); vk_gemm.md its table, with cuBLAS beside
#   facts.txt, all.log
# Run from a copy of the tree whose parent holds gl/ and vkinc/ (lease_setup.sh, which this
# sources, says what they hold) and spv/<version>/gemm_nn.spv for baseline and tiled (no
# glslc there: compile them on a host that has it, from the same tree, with
#   python benchmarks/bench_vk_gemm.py --write-spirv ../spv
# which also records each version's shader hash, checked here); COMMIT names the copied
# commit. Example: OUT=/tmp/out bash benchmarks/vk_gemm_lease.sh
set -u
source "$(dirname "$0")/lease_setup.sh"

say "cuBLAS FP32"
timeout -k 5 "${CUBLAS_S:-40}" python3 benchmarks/bench_cublas.py --repeats 5 \
    --json "$OUT/cublas.json"

say "Vulkan GEMM: baseline and tiled (its tuning.yaml candidates), checked against numpy"
timeout -k 5 "${VK_S:-150}" python3 benchmarks/bench_vk_gemm.py --runner "$RB" --spirv ../spv \
    --sizes "${SIZES:-1024,2048,4096}" --cublas-json "$OUT/cublas.json" \
    --json "$OUT/vk_gemm.json" --per-candidate | tee "$OUT/vk_gemm.md"
say "done"
