#!/usr/bin/env bash
# One lease of a lent NVIDIA machine for the Vulkan training step against phonetrain's own
# OpenCL step, per kernel version (docs/vulkan.md's step table; goal: Vulkan within 1.5x of
# OpenCL on every model), every step in its own `timeout`, every result under $OUT as it
# completes (about 3 minutes with the defaults):
#   <backend>_<kernel>_r<round>.json  bench_runner_ab.py --json of one arm and round: the four
#                 models' step (batch 32, resident placement, events off, 20 warm-up + $ITERS
#                 timed iterations, every step verified per step against the numpy reference)
#   step.md       the table: median ms per arm (median over its rounds), Vulkan / OpenCL
#   facts.txt, all.log
# Arms: for each kernel version of $KERNELS (default fused), Vulkan (NVIDIA's driver) and
# OpenCL (platform $PLATFORM, default NVIDIA), in $ROUNDS alternating rounds (Vulkan first in even rounds,
# OpenCL first in odd ones) so both see the same drift of the machine.
# Set-up (lease_setup.sh, sourced): $DEV (default .., the tree's parent; DEV=.dev for a checkout
# that keeps them in its ignored .dev/) holds gl/ and vkinc/, and the SPIR-V comes from either
#   $DEV/whl/glslc/   glslc and libshaderc.so.1: the shaders are compiled here, from this tree
#   $DEV/spv/         else spv/<version>/*.spv, compiled on a host with glslc from the same
#                     tree (python benchmarks/bench_vk_gemm.py --versions fused,baseline
#                     --write-spirv $DEV/spv, which records each version's shader hash)
# REV (or a file COMMIT) names the copied commit. Example, from a checkout with .dev/:
#   OUT=/tmp/out DEV=.dev bash benchmarks/vk_step_lease.sh
#   OUT=/tmp/out DEV=.dev KERNELS=fused,baseline ROUNDS=3 bash benchmarks/vk_step_lease.sh
set -u
source "$(dirname "$0")/lease_setup.sh"
MODELS=${MODELS:-mlp_784_256_128_16,lenet5,vgg_small,mobilenetv2_small}
KERNELS=${KERNELS:-fused}
ROUNDS=${ROUNDS:-2}
ITERS=${ITERS:-100}
PLATFORM=${PLATFORM:-NVIDIA}   # the OpenCL platform (name substring)

if [ -x "$DEV/whl/glslc/glslc" ]; then
  export GLSLC=$(cd "$DEV/whl/glslc" && pwd)/glslc
  export LD_LIBRARY_PATH=$(dirname "$GLSLC")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  say "SPIR-V: compiled here with $("$GLSLC" --version 2>&1 | head -n 1)"
  SPV=
else
  SPV=$(cd "$DEV/spv" && pwd)
  say "SPIR-V: $SPV (compiled elsewhere)"
  for k in ${KERNELS//,/ }; do
    stamp="$SPV/$k/shader_hash.txt"
    want=$(python3 -c "import sys; sys.path.insert(0, 'src')
from phonetrain.kernels.spirv import shader_hash; print(shader_hash('$k'))")
    [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
      || say "warning: $SPV/$k was not compiled from this tree's $k shaders"
  done
fi

AB=(python3 benchmarks/bench_runner_ab.py --source-commit "$REV" --models "$MODELS"
    --rounds 1 --profiling off --iterations "$ITERS")
arm() {   # arm BACKEND KERNEL ROUND
  local be=$1 k=$2 r=$3 extra=()
  if [ "$be" = vulkan ]; then
    extra=(--backend vulkan); [ -n "$SPV" ] && extra+=(--spirv "$SPV/$k")
  else
    extra=(--platform "$PLATFORM")
  fi
  say "$be $k, round $r, load $(cut -d' ' -f1-3 /proc/loadavg)"
  timeout -k 5 "${ARM_S:-120}" "${AB[@]}" "${extra[@]}" --kernel "$k" \
      --json "$OUT/${be}_${k}_r$r.json" now="$RB" 2>&1 | tail -n 6
}
for k in ${KERNELS//,/ }; do
  for ((r = 0; r < ROUNDS; r++)); do
    if ((r % 2 == 0)); then arm vulkan "$k" "$r"; arm opencl "$k" "$r"
    else arm opencl "$k" "$r"; arm vulkan "$k" "$r"; fi
  done
done

python3 - "$OUT" "$MODELS" "$KERNELS" <<'PY' | tee "$OUT/step.md"
import json, statistics, sys
from pathlib import Path
out, models, kernels = Path(sys.argv[1]), sys.argv[2].split(","), sys.argv[3].split(",")
runs = {}
for f in sorted(out.glob("*_r*.json")):
    doc = json.loads(f.read_text())
    for r in doc["runs"]:
        runs.setdefault((doc["backend"], doc["kernel"], r["model"]), []).append(r)
print("| model | kernel | Vulkan ms | OpenCL ms | Vulkan / OpenCL | every step verified |")
print("|---|---|---:|---:|---:|---|")
for k in kernels:
    for m in models:
        vk, cl = runs.get(("vulkan", k, m), []), runs.get(("opencl", k, m), [])
        med = lambda rs: statistics.median(r["median_ms"] for r in rs) if rs else None
        v, c = med(vk), med(cl)
        ratio = f"{v / c:.2f}x" if v and c else "-"
        ok = all(r["verified"] for r in vk + cl) and bool(vk) and bool(cl)
        fmt = lambda x: f"{x:.3f}" if x else "-"
        print(f"| {m} | {k} | {fmt(v)} | {fmt(c)} | {ratio} | {ok} |")
PY
say "done"
