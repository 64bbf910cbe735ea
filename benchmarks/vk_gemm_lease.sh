#!/usr/bin/env bash
# One lease of a lent NVIDIA machine for the Vulkan GEMM against cuBLAS FP32 at 1024/2048/4096
# squares (docs/vulkan.md's GEMM table; goal: tiled >= 50% of cuBLAS at 4096), every step in
# its own `timeout` so one slow step cannot cost the others, every result under $OUT as it
# completes (4-6 minutes in all with the default configurations):
#   cublas.json   cuBLAS FP32 (torch.matmul, TF32 off; bench_cublas.py --json)
#   vk_gemm.json  gemm_nn of $VERSIONS on NVIDIA's Vulkan driver, tiled with its defaults and
#                 then $CONFIGS (one configuration of its specialization constants a line;
#                 empty: every candidate of src/kernels/tiled/vk/tuning.yaml), each result
#                 checked against numpy (bench_vk_gemm.py --json; every configuration's line
#                 also in all.log); vk_gemm.md its table, with cuBLAS beside
#   facts.txt, all.log
# Set-up (lease_setup.sh, sourced): $DEV (default .., the tree's parent; DEV=.dev for a checkout
# that keeps them in its ignored .dev/) holds gl/ and vkinc/, and the SPIR-V comes from either
#   $DEV/whl/glslc/   glslc and libshaderc.so.1: the shaders are compiled here, from this tree
#   $DEV/spv/         else spv/<version>/gemm_nn.spv, compiled on a host with glslc from the
#                     same tree (python benchmarks/bench_vk_gemm.py --write-spirv $DEV/spv,
#                     which records each version's shader hash, checked here)
# REV (or a file COMMIT) names the copied commit. Example, from a checkout with .dev/:
#   OUT=/tmp/out DEV=.dev VERSIONS=tiled bash benchmarks/vk_gemm_lease.sh
set -u
source "$(dirname "$0")/lease_setup.sh"
VERSIONS=${VERSIONS:-baseline,tiled}
# The configurations timed beside tiled's defaults (gemm_tiled.glsl's banner says what each
# constant does): the OpenCL kernel's H100 winner at 2048/4096 (128x128 tiles, vec4 shared
# reads, prefetch, two tiles) with and without vec4 global loads, its TSK 8 and 128x64 and
# 64x64 (the OpenCL winner at 1024) relatives, the vec4 reads alone (no prefetch, one tile),
# and the scalar shader's best of the last lease (128x64, 8x4) as the control.
CONFIGS=${CONFIGS-"TSM=128 TSN=128 TSK=16 WPTM=8 WPTN=8 PAD=4 VW=4 PREFETCH=1 DBUF=1
TSM=128 TSN=128 TSK=16 WPTM=8 WPTN=8 PAD=4 VW=4 PREFETCH=1 DBUF=1 GVW=4
TSM=128 TSN=128 TSK=8 WPTM=8 WPTN=8 PAD=4 VW=4 PREFETCH=1 DBUF=1 GVW=4
TSM=128 TSN=64 TSK=16 WPTM=8 WPTN=4 PAD=4 VW=4 PREFETCH=1 DBUF=1 GVW=4
TSM=64 TSN=64 TSK=16 WPTM=4 WPTN=4 PAD=4 VW=4 PREFETCH=1 DBUF=1 GVW=4
TSM=128 TSN=128 TSK=16 WPTM=8 WPTN=8 PAD=4 VW=4
TSM=128 TSN=64 TSK=16 WPTM=8 WPTN=4"}
CFG=()
while IFS= read -r line; do [ -n "$line" ] && CFG+=(--config "$line"); done <<< "$CONFIGS"

if [ -x "$DEV/whl/glslc/glslc" ]; then
  export GLSLC=$(cd "$DEV/whl/glslc" && pwd)/glslc
  export LD_LIBRARY_PATH=$(dirname "$GLSLC")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  SPV=()
  say "SPIR-V: compiled here with $("$GLSLC" --version 2>&1 | head -n 1)"
else
  SPV=(--spirv "$DEV/spv")
  say "SPIR-V: $DEV/spv (compiled elsewhere)"
fi

say "cuBLAS FP32"
timeout -k 5 "${CUBLAS_S:-45}" python3 benchmarks/bench_cublas.py --repeats 5 \
    --json "$OUT/cublas.json"

say "Vulkan GEMM: $VERSIONS; tiled: its defaults, then $(( ${#CFG[@]} / 2 )) configurations"
timeout -k 5 "${VK_S:-330}" python3 benchmarks/bench_vk_gemm.py --runner "$RB" \
    ${SPV[@]+"${SPV[@]}"} --versions "$VERSIONS" --sizes "${SIZES:-1024,2048,4096}" \
    ${CFG[@]+"${CFG[@]}"} \
    --cublas-json "$OUT/cublas.json" --json "$OUT/vk_gemm.json" --per-candidate \
    | tee "$OUT/vk_gemm.md"
say "done"
