#!/usr/bin/env bash
# .ci/run runs exactly the README's commands, so that a green CI proves what the README tells a
# fresh machine to type: every command the README shows in a ```sh block that sets up and then
# runs make (the demo, `make test`, `make asan-unit`, the fuzzing) is a line of .ci/run, character
# for character; .ci/run runs no other; and each is followed by the status check that names it
# (`passed $? "COMMAND"`), so that a failure stops CI. A setup-and-make command in the prose's
# backticks must be one of them too, on one line.
# Usage: tests/ci_runs_readme_test.sh REPO_ROOT
set -euo pipefail
root=${1:?usage: $0 REPO_ROOT}
fail() { echo "ci_runs_readme_test: $*" >&2; exit 1; }

shown=$(awk '/^```sh$/ {inside = 1; next} /^```$/ {inside = 0} inside' "$root/README.md" |
  grep -E '^\./scripts/setup\.sh.*&& make ' | sort -u || true)
[[ -n $shown ]] || fail "README.md shows no test command in a \`\`\`sh block"
run=$(grep -E '^\./scripts/' "$root/.ci/run" | sort -u || true)
if [[ $shown != "$run" ]]; then
  fail "the README's test commands and .ci/run's differ (< README.md, > .ci/run):
$(diff <(echo "$shown") <(echo "$run") || true)"
fi
# A setup-and-make command the README's prose shows in backticks is one CI runs too, and sits
# whole on one line: wrapped over two, a reader (or a tool) that copies the line gets a command CI
# never ran (`./scripts/setup.sh --torch && make test` without its TORCH=pip).
prose=$(awk '/^```/ {fenced = !fenced; next} !fenced {print NR ": " $0}' "$root/README.md" |
  grep -oE '^[0-9]+: |`\./scripts/setup\.sh[^`]*&& make [^`]*`?|`\./scripts/setup\.sh[^`]*$' |
  awk '/^[0-9]+: $/ {line = $1; next} {print line " " $0}' || true)
while IFS= read -r shown_inline; do
  [[ -n $shown_inline ]] || continue
  where=${shown_inline%% *} code=${shown_inline#* }
  [[ $code == *\` && $code != \` ]] || fail "README.md line ${where%:}: '$code' is wrapped over two lines; keep the command on one"
  code=${code#\`} code=${code%\`}
  [[ $code == *"&& make "* ]] || continue
  grep -Fxq -- "$code" <<<"$run" || fail "README.md line ${where%:} shows '$code', which .ci/run does not run"
done <<<"$prose"
while IFS= read -r command; do
  next=$(grep -Fx -A1 -- "$command" "$root/.ci/run" | sed -n 2p)
  [[ $next == "passed \$? \"$command\"" ]] ||
    fail ".ci/run: '$command' is not followed by: passed \$? \"$command\" (found: '$next')"
done <<<"$run"
echo "ci_runs_readme_test: .ci/run runs the README's $(wc -l <<<"$run") commands, each checked"
