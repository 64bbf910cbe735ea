#!/usr/bin/env bash
# One lease of a lent NVIDIA machine for the GPU step's questions (docs/benchmarks.md), every
# step in its own `timeout` so one slow step cannot cost the others, every result under $OUT as
# it completes:
#   ab.json     the fused step, events off, plain against split-K convolution updates
#               (splitk=1024) in alternating rounds (bench_runner_ab.py; every run verified
#               per step; add NAME=RUNNER:KEY=VALUE arms for kernel variants)
#   torch.json  PyTorch CPU eager / CUDA eager / CUDA graphs (peers.py --peers torch)
#   cpu1.log    the CPU backend at one thread, LeNet-5, processes alternating without and with
#               `taskset -c 0` (peers.py; rows printed as they complete)
#   vk.log      the baseline step on Vulkan (NVIDIA's driver) beside OpenCL, events off
#   gemm.log    cuBLAS FP32 and tuned `tiled` at 1024/2048/4096 (bench_cublas.py, bench_gemm.py)
#   facts.txt, all.log
# Run from a copy of the tree whose parent holds gl/ and vkinc/ (lease_setup.sh, which this
# sources, says what they hold) and spv/baseline/ (the baseline shaders compiled with glslc
# where it exists); COMMIT names the copied commit.
set -u
source "$(dirname "$0")/lease_setup.sh"
MODELS=mlp_784_256_128_16,lenet5,vgg_small,mobilenetv2_small

AB=(python3 benchmarks/bench_runner_ab.py --source-commit "$REV")
say "A/B: split-K convolution updates, events off"
timeout -k 5 "${AB_S:-190}" "${AB[@]}" --platform NVIDIA --models "$MODELS" --rounds 3 \
    --profiling off --json "$OUT/ab.json" base="$RB" "splitk=$RB:splitk=1024" | tail -n 20

say "PyTorch peers"
timeout -k 5 "${TORCH_S:-75}" python3 benchmarks/peers.py --peers torch --platforms none \
    --threads 16 --models "$MODELS" --json "$OUT/torch.json" --source-commit "$REV" >/dev/null

say "CPU backend, one thread, LeNet-5: plain / taskset -c 0 alternating"
PEER1=(python3 benchmarks/peers.py --peers phonetrain --platforms none --threads 1
       --models lenet5 --runner "$RB" --source-commit "$REV")
for mode in plain taskset taskset plain; do
  pre=(); [ $mode = taskset ] && pre=(taskset -c 0)
  echo "-- $mode, load $(cut -d' ' -f1-3 /proc/loadavg)"
  timeout -k 5 "${CPU_S:-20}" "${pre[@]}" "${PEER1[@]}" 2>&1 | grep "^| phonetrain\|^select"
done > "$OUT/cpu1.log" 2>&1
cat "$OUT/cpu1.log"

say "Vulkan beside OpenCL, kernel baseline, events off"
{ timeout -k 5 "${VK_S:-45}" "${AB[@]}" --backend vulkan --kernel baseline \
      --spirv ../spv/baseline --models "$MODELS" --rounds 1 --profiling off \
      --iterations 100 --json /tmp/vk.json now="$RB" 2>&1
  timeout -k 5 "${CLB_S:-35}" "${AB[@]}" --platform NVIDIA --kernel baseline \
      --models "$MODELS" --rounds 1 --profiling off --iterations 100 \
      --json /tmp/clbase.json now="$RB" 2>&1; } > "$OUT/vk.log"
tail -n 14 "$OUT/vk.log"

say "GEMM: cuBLAS FP32 and tuned tiled"
{ timeout -k 5 30 python3 benchmarks/bench_cublas.py --repeats 5 2>&1
  timeout -k 5 "${GEMM_S:-65}" python3 benchmarks/bench_gemm.py --platform NVIDIA \
      --device-type gpu --no-mlp --no-peaks --tune --min-time-ms 50 --repeats 3 \
      --versions tiled --runner "$RB" 2>&1; } > "$OUT/gemm.log"
tail -n 12 "$OUT/gemm.log"
say "done"
