#!/usr/bin/env bash
# The student release names only what it holds: every file or folder that its README, handouts,
# docs/GRADING.md and scripts/setup.sh name (a markdown link, or a path under one of the kit's folders),
# and every section of "the README's" that they cite, is in a release made here by the grader
# itself (grader release: its own list of what stays out), so the test follows that list.
# Placeholders (tasks/T/, T.h) are not paths; nor are the answers the release leaves out on purpose
# (solutions/..., tests/mutants/...), which docs/GRADING.md names for an instructor's image.
# Usage: tests/release_links_test.sh REPO_ROOT BUILD_DIR
set -euo pipefail
root=${1:?usage: $0 REPO_ROOT BUILD_DIR} build=${2:?usage: $0 REPO_ROOT BUILD_DIR}
kit=$(mktemp -d)
trap 'rm -rf "$kit"' EXIT
"$build/grader/grader" release --out "$kit/release" >/dev/null
cd "$kit/release"
failures=0
fail() { echo "release_links_test: $*" >&2; failures=$((failures + 1)); }
exists() { compgen -G "$1" >/dev/null || [[ -e ${1%/} ]]; }

texts=(README.md handouts/*.md docs/GRADING.md scripts/setup.sh)
for text in "${texts[@]}"; do
  [[ -f $text ]] || { fail "$text is not in the release"; continue; }
  # Paths under the kit's folders, as the texts write them.
  while IFS= read -r path; do
    [[ -z $path || $path =~ (^|/)(T|X)(/|\.|_|$) || $path == *'<'* || $path =~ ^(solutions|tests/mutants)(/|$) ]] && continue
    exists "$path" || fail "$text names $path, which the release does not hold: drop it or say where it is"
  done < <(grep -oE '(^|[^A-Za-z0-9_./-])(common|tasks|grader|handouts|docs|scripts|tests|tools|cmake|fuzz|plots|bench|solutions)/[A-Za-z0-9_.*/-]*[A-Za-z0-9_*/]' "$text" |
           sed -E 's/^[^a-z]//' | sort -u)
  # Markdown links, relative to the text's folder.
  while IFS= read -r link; do
    link=${link%%#*}
    [[ -z $link || $link =~ ^[a-z]+: ]] && continue
    exists "$(dirname "$text")/$link" || fail "$text links to $link, which the release does not hold"
  done < <(grep -oE '\]\([^)]+\)' "$text" | sed -E 's/^\]\((.*)\)$/\1/' | sort -u)
  # Sections of the README cited by name: the release's README.md must have that heading.
  while IFS= read -r section; do
    grep -qE "^#+ .*${section}" README.md ||
      fail "$text cites the README's \"$section\", a section the release's README.md (docs/STUDENTS.md) does not have"
  done < <(grep -oE "README's [\"'][^\"']+[\"']" "$text" | sed -E "s/^README's [\"'](.*)[\"']$/\\1/" | sort -u)
done
[[ $failures -eq 0 ]] || exit 1
echo "release_links_test: ${#texts[@]} released texts name only files and sections the release holds"
