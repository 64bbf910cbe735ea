#!/usr/bin/env python3
"""Are a study's lowered plans byte for byte those of another commit? A restructuring check.

Each tree (this checkout, and ``--rev`` checked out into a temporary git worktree) composes
the sweep (``--sweep``, default ``default``) with its own code, lowers every plan of it with
its own lowering (the lower job's params parsed to a ``LowerSpec`` and ``write_plan_dir``:
what the workflow's ``lower`` job runs) in a child process, and the two folders are compared file
by file (``plan.json`` and every tensor file; the settings stamp ``inputs.json`` is left out:
it names the code that made it). Prints one row per plan and exits 1 when any plan of the
other commit differs or is gone; a plan only this checkout has (a new experiment, e.g. a
backend added to the sweep) is listed as new and does not count against it::

    python benchmarks/plan_identity.py --rev e47c5b8
    python benchmarks/plan_identity.py --rev e47c5b8 --sweep zoo
"""

from __future__ import annotations

import argparse
import filecmp
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

DUMP = """
import sys
from pathlib import Path
from phonetrain.config import compose_sweep
from phonetrain.lowering import write_plan_dir
from phonetrain.stages.params import job_params
try:
    from phonetrain.stages.specs import parse_plan
except ImportError:   # a tree from before the lower job's spec was a LowerSpec
    from phonetrain.stages.specs import PlanSpec, parse
    from phonetrain.stages.train import lower_spec
    parse_plan = lambda p, job: lower_spec(parse(PlanSpec, p, job))
sweep = compose_sweep([f"sweep={sys.argv[2]}"])
for exp, params in sorted(job_params(sweep)["plan"].items()):
    write_plan_dir(parse_plan(params, "lower"), Path(sys.argv[1]))
    print(exp, flush=True)
"""


def dump(tree: Path, out: Path, sweep: str) -> None:
    """Lower every plan of ``sweep`` with ``tree``'s code into ``out`` (plans/<id>/)."""
    env = dict(os.environ, PYTHONPATH=str(tree / "src"))
    subprocess.run([sys.executable, "-c", DUMP, str(out), sweep], cwd=tree, env=env,
                   check=True, stdout=subprocess.DEVNULL)


def differing(a: Path, b: Path) -> list[str]:
    """Files under ``a`` and ``b`` (relative paths) that are missing on one side or differ."""
    files = lambda root: {p.relative_to(root) for p in root.rglob("*")
                          if p.is_file() and p.name != "inputs.json"}
    fa, fb = files(a), files(b)
    out = sorted(str(p) for p in fa ^ fb)
    out += sorted(str(p) for p in fa & fb if not filecmp.cmp(a / p, b / p, shallow=False))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", required=True, help="the commit to compare with (e.g. a tag or SHA)")
    ap.add_argument("--sweep", default="default", help="conf/sweep/<name>.yaml (default: default)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="plan-identity-") as tmp:
        t = Path(tmp)
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q",
                        str(t / "before"), a.rev], check=True)
        try:
            dump(t / "before", t / "plans-before", a.sweep)
            dump(REPO, t / "plans-now", a.sweep)
            before = {p.name for p in (t / "plans-before" / "plans").iterdir()}
            now = {p.name for p in (t / "plans-now" / "plans").iterdir()}
            print(f"| plan ({a.sweep}, {a.rev} -> this checkout) | files | identical |")
            print("|---|---:|---|")
            bad = new = 0
            for name in sorted(before | now):
                pa, pb = t / "plans-before" / "plans" / name, t / "plans-now" / "plans" / name
                if name not in before:
                    new += 1
                    verdict = "new (no such plan before)"
                else:
                    diff = differing(pa, pb) if name in now else ["(gone)"]
                    bad += bool(diff)
                    verdict = "yes" if not diff else "no: " + ", ".join(diff[:4])
                root = pb if name in now else pa
                n = sum(1 for p in root.rglob("*") if p.is_file() and p.name != "inputs.json")
                print(f"| {name} | {n} | {verdict} |")
            print(f"\n{len(before) - bad} of {len(before)} plans of {a.rev} identical; "
                  f"{new} new")
            return 1 if bad else 0
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force",
                            str(t / "before")], check=False)


if __name__ == "__main__":
    sys.exit(main())
