#!/usr/bin/env bash
# The default study on a lent machine: `snakemake --cores $CORES all` from a fresh results
# folder in a scratch copy of this tree, its closing line and wall time, then each rule's cost
# (benchmarks/bench_study_cost.py). Every result goes under $OUT as it completes:
#   facts.txt    the machine, Python, OpenCL and Vulkan facts, the copied commit
#   install.log  the wheels pip installed (offline, from ../whl)
#   study.log    Snakemake's output as it runs (its last "phonetrain: study:" line closes it)
#   cost.txt     wall time, exit status, closing line, jobs and cost by rule
#   report.md    the study's report; results.tgz: its summary tables and job logs
#   all.log      everything above, in order
# Run from a copy of the tree whose parent holds whl/: the wheels of what the study imports
# and such a machine may lack, for Python 3.12 on manylinux x86_64, and in it glslc/ (glslc
# and libshaderc.so.1: the Vulkan runs' SPIR-V is compiled on the host; the machine has no
# glslc). Optional beside whl/: gl/
# (the Vulkan loader and libglvnd .debs NVIDIA's Vulkan driver needs) and vkinc/ (the Vulkan
# headers, so the runner builds its Vulkan backend); without them the two Vulkan runs are
# recorded skipped. The wheels go into one folder ahead of python3's own packages (pip
# --target, --no-deps: each wheel as it is); what they leave out (numpy, pyarrow, scikit-learn,
# SciPy, Pillow, PuLP: too large for the 64 MiB a call carries, or already there) comes from
# python3's own packages, and the script stops before the study when one is missing. Without
# PuLP Snakemake schedules with its greedy scheduler (it says so).
#   CORES=4 STUDY_S=480 OVERRIDES='["device.opencl_platform=NVIDIA"]' bash benchmarks/study_lease.sh
set -u
OUT=${OUT:?set OUT to the folder for the results}
CORES=${CORES:-4}
STUDY_S=${STUDY_S:-480}      # the study's own limit, seconds (a call has 600 in all)
OVERRIDES=${OVERRIDES:-[]}   # Hydra overrides, a JSON list (default: the default study)
# --keep-going: a job that fails (a Vulkan deploy without glslc, say) costs its own runs, not
# the lease; the partial report and the closing line follow (rules/common.smk, onerror)
FLAGS=${FLAGS:---keep-going}
TREE=$(cd "$(dirname "$0")/.." && pwd)
WHL=${WHL:-$TREE/../whl}
[ -d "$WHL" ] || WHL=$(cd "$(dirname "$0")" && pwd)/whl   # the script copied beside whl/
SITE=${SITE:-/tmp/study-site}
WS=${WS:-/tmp/study}
export PYTHONUNBUFFERED=1
T0=$(date +%s)
exec > >(tee -a "$OUT/all.log") 2>&1
say() { echo "== [$(( $(date +%s) - T0 )) s] $*"; }

{ date -u; uptime; echo "cores $(nproc)"; grep -m1 "model name" /proc/cpuinfo
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -n 2
  python3 --version; echo "tree $(cat "$TREE/COMMIT" 2>/dev/null ||
    git -C "$TREE" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "OpenCL vendors: $(ls /etc/OpenCL/vendors 2>/dev/null | tr '\n' ' ')"
  echo "wheels: $(ls "$WHL"/*.whl 2>/dev/null | wc -l) in $WHL ($(du -sh "$WHL" 2>/dev/null | cut -f1))"
} > "$OUT/facts.txt" 2>&1
cat "$OUT/facts.txt"

# --- the wheels: pip offline, into a folder ahead of python3's own packages ------------------
say "install"
{
  python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir \
    --disable-pip-version-check --target "$SITE" "$WHL"/*.whl
} > "$OUT/install.log" 2>&1 || { tail -n 30 "$OUT/install.log"; say "install failed"; exit 1; }
export PYTHONPATH="$SITE" PATH="$SITE/bin:$PATH"
echo "installed $(ls "$WHL"/*.whl | wc -l) wheels into $SITE"
# what the study imports and the wheels leave to python3 (numpy, pyarrow, scikit-learn, SciPy,
# Pillow): stop here, naming what is missing, rather than in the middle of the study
python3 - <<'PY' || { say "a module the study needs is missing: carry its wheel in $WHL"; exit 1; }
import importlib, sys
need = ["numpy", "pandas", "pyarrow", "pyarrow.parquet", "matplotlib", "sklearn", "scipy",
        "PIL", "yaml", "hydra", "omegaconf", "snakemake", "filelock", "jinja2", "click"]
missing, have = [], []
for name in need:
    try:
        m = importlib.import_module(name)
        have.append(f"{name} {getattr(m, '__version__', '')}".strip())
    except Exception as e:
        missing.append(f"{name} ({type(e).__name__}: {e})")
print("have:", ", ".join(have))
if missing:
    print("missing:", "; ".join(missing))
    sys.exit(1)
PY
if [ -x "$WHL/glslc/glslc" ]; then
  export GLSLC="$WHL/glslc/glslc" LD_LIBRARY_PATH="$WHL/glslc${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if ls "$TREE"/../gl/*.deb >/dev/null 2>&1; then
  for f in "$TREE"/../gl/*.deb; do dpkg -x "$f" /; done; ldconfig
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
[ -d "$TREE/../vkinc" ] && export CPATH="$TREE/../vkinc${CPATH:+:$CPATH}"
echo "glslc: ${GLSLC:-$(command -v glslc || echo none)}; Vulkan loader: $(ldconfig -p | grep -c libvulkan.so.1)"

# --- the study: a scratch copy, a fresh results folder ----------------------------------------
rm -rf "$WS"; mkdir -p "$WS"
cp -r "$TREE/Snakefile" "$TREE/rules" "$TREE/conf" "$TREE/src" "$WS/"
export PYTHONPATH="$WS/src:$SITE"
cd "$WS" || exit 1
CFG=(--config "overrides=$OVERRIDES")   # last: --config takes every word after it
say "planned jobs"
snakemake --cores "$CORES" -n --quiet rules all "${CFG[@]}" 2>&1 | grep -E "^\S+\s+[0-9]+$"
say "snakemake --cores $CORES all (limit $STUDY_S s)"
SINCE=$(date +%s.%N)
timeout -k 10 "$STUDY_S" snakemake --cores "$CORES" $FLAGS all "${CFG[@]}" > "$OUT/study.log" \
  2>&1
RC=$?
WALL=$(python3 -c "import time; print(f'{time.time() - $SINCE:.1f}')")
tail -n 5 "$OUT/study.log"
say "study exit $RC after $WALL s"

{ echo "snakemake --cores $CORES $FLAGS all: exit $RC, wall $WALL s (limit $STUDY_S s), overrides $OVERRIDES"
  echo "closing line: $(grep "phonetrain: study:" "$OUT/study.log" | tail -n 1)"
  echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  python3 - "$TREE" "$WS" "$SINCE" "$WALL" <<'PY'
import sys
from pathlib import Path
tree, ws, since, wall = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
sys.path.insert(0, str(tree / "benchmarks"))
import bench_study_cost as b  # noqa: E402
rules, slowest, in_jobs = b.cost_rows(ws, ws / "results", since)
b.report(rules, slowest, wall, in_jobs, "cost by rule (benchmarks/bench_study_cost.py)")
PY
} > "$OUT/cost.txt" 2>&1
cat "$OUT/cost.txt"
cp results/report/report.md "$OUT/report.md" 2>/dev/null
tar czf "$OUT/results.tgz" results/summary results/logs 2>/dev/null
say "done"
