#!/bin/sh
# A command tool for lloyal: reads {"pattern": "…"} on stdin, searches the
# files under src/ for it (a basic regular expression), writes
# {"matches": ["file:line: text", …]} (at most 40) on stdout and a progress
# line per file on stderr. A pattern holding a double quote is not supported.
set -eu
cd "$(dirname "$0")" # src/ is beside this script
pattern=$(sed -n 's/.*"pattern"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p')
if [ -z "$pattern" ]; then
  echo '{"error": "give a pattern, e.g. {\"pattern\": \"TODO\"}"}'
  exit 0
fi
total=$(ls src | wc -l)
n=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for f in src/*; do
  n=$((n + 1))
  grep -n -- "$pattern" "$f" | sed "s|^|$f:|" >>"$out" || true
  printf '{"progress": [%d, %d]}\n' "$n" "$total" >&2
done
# Each match as a JSON string: backslashes and quotes escaped, tabs as spaces.
matches=$(head -40 "$out" | sed 's/\\/\\\\/g; s/"/\\"/g; s/	/ /g; s/^/"/; s/$/"/' | paste -sd, -)
printf '{"matches": [%s]}\n' "$matches"
