# Sourced by the NVIDIA lease scripts (gpu_step_lease.sh, vk_gemm_lease.sh), run from a copy of
# the tree whose parent (or $DEV, e.g. DEV=.dev for a checkout that keeps them in its ignored
# .dev/) holds gl/ (the .debs of libvulkan1 and of libglvnd0, libglx0, libgl1,
# libegl1, libopengl0, libgles2: NVIDIA's Vulkan driver libGLX_nvidia needs libglvnd, else
# vkCreateInstance returns VK_ERROR_INCOMPATIBLE_DRIVER) and vkinc/ (the Vulkan headers, so the
# runner builds with its Vulkan backend). It tees everything into $OUT/all.log, writes the
# machine's facts to $OUT/facts.txt, makes NVIDIA's Vulkan driver reachable and builds the
# runner into $RB (exit 1 when that fails); REV is the copied commit ($REV, else the file
# COMMIT, else git), `say` prints a line with the seconds since the start.
OUT=${OUT:?set OUT to the folder for the results}
DEV=${DEV:-..}
export PYTHONUNBUFFERED=1
REV=${REV:-$(cat COMMIT 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)}
T0=$(date +%s)
exec > >(tee -a "$OUT/all.log") 2>&1
say() { echo "== [$(( $(date +%s) - T0 )) s] $*"; }

{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv
  uptime; nproc; grep -m1 "model name" /proc/cpuinfo
  python3 -c "import torch, numpy; print('torch', torch.__version__, 'numpy', numpy.__version__)"
  echo "copied from $REV"; } > "$OUT/facts.txt" 2>&1
cat "$OUT/facts.txt"

if ls "$DEV"/gl/*.deb >/dev/null 2>&1; then
  for f in "$DEV"/gl/*.deb; do dpkg -x "$f" /; done; ldconfig
fi
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export CPATH=$(cd "$DEV" && pwd)/vkinc
RB=$(timeout 120 python3 -c "import sys; sys.path.insert(0, 'src')
from pathlib import Path; from phonetrain.devices.toolchains import build_runner
print(build_runner(Path('/tmp/rb')))") || { say "runner build failed"; exit 1; }
say "runner $RB"
