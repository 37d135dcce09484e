#!/usr/bin/env bash
# Makes tests/data/grade-sample: a real grading results folder, as `grader check all --solutions`
# writes it, trimmed to what `grader report` reads (results.json, and run.json and
# output/results.json of the runs it plots, stored compactly). report_test renders it, and people can look
# at its report to judge the figures.
#
# Usage, from the repository after `make build`:
#   tests/data/make_grade_sample.sh             grade the reference solutions now (about 5 minutes)
#   tests/data/make_grade_sample.sh out/grade   trim an existing grading (e.g. the one `make demo` wrote,
#                                               with `sudo make cluster-demo`'s runs added to it:
#                                               figure 9 is drawn only from those)
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
out="$repo/tests/data/grade-sample"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

if [[ $# -ge 1 ]]; then
  from=$(cd "$1" && pwd)
else
  from="$scratch/grade"
  "$repo/build/grader/grader" check all --solutions --results "$from"
fi

rm -rf "$out"
mkdir -p "$out"
python3 - "$from" "$out" <<'PY'
import json, pathlib, sys
src, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
def copy(rel):
    data = json.loads((src / rel).read_text())
    (dst / rel).parent.mkdir(parents=True, exist_ok=True)
    (dst / rel).write_text(json.dumps(data, separators=(",", ":"), sort_keys=True) + "\n")
copy("results.json")
plotted = {"timing", "losses", "reference", "bucket-sweep", "traffic", "dp-timing-weak", "dp-timing-strong",
           "dp-learning", "pipeline-timing", "pp-timing", "cluster", "cluster-dp", "cluster-pp"}
for run in sorted((src / "runs").iterdir()):
    if json.loads((run / "run.json").read_text()).get("purpose") not in plotted:
        continue
    copy(f"runs/{run.name}/run.json")
    if (run / "output" / "results.json").exists():
        copy(f"runs/{run.name}/output/results.json")
PY
echo "wrote $out ($(du -sh "$out" | cut -f1))"
