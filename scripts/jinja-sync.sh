#!/usr/bin/env bash
# engine/chat/jinja is github.com/ardanlabs/jinja at $VERSION (from the Go
# module cache) plus the patch series engine/chat/jinja/patches/NNNN-*.patch,
# applied in order. This script keeps the two in step, the way ollama keeps
# llama.cpp (its llama/patches and Makefile.sync):
#
#   scripts/jinja-sync.sh              regenerate engine/chat/jinja: upstream's
#                                      non-test sources and LICENSE, then every
#                                      patch. Idempotent.
#   scripts/jinja-sync.sh workdir DIR  make DIR a git repository holding
#                                      upstream as its first commit (tag
#                                      "upstream") and one commit per patch, to
#                                      edit, split, reorder or add patches with
#                                      git (commit --amend, rebase -i, commit).
#   scripts/jinja-sync.sh format DIR   rewrite patches/ from DIR's commits after
#                                      "upstream" (git format-patch); then run
#                                      the script with no argument.
#
# engine/chat/jinja's own files, which no patch makes: README.md,
# sync_test.go (the test that the tree is upstream plus the patches) and
# patches/. Everything else there is generated: edit it through a patch.
set -euo pipefail

MODULE=github.com/ardanlabs/jinja
VERSION=v1.8.0
# The module's hash as go.sum records it; a download that differs is refused.
SUM='h1:NuRapYr/hv8J+4v1KymVAbbu6vuqMu+poXkJHfXqLs4='
# What is taken from upstream: the non-test sources and the licence.
UPSTREAM_FILES=(LICENSE ast.go builtins.go eval.go parse.go scan.go template.go value.go)
LOCAL_FILES=(README.md sync_test.go patches)

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tree="$root/engine/chat/jinja"

die() {
  echo "jinja-sync: $*" >&2
  exit 1
}

# git without the caller's configuration (diff.noprefix, format.signature and
# the like would change the patches), under a fixed identity.
g() {
  GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 \
    GIT_COMMITTER_NAME=jinja-sync GIT_COMMITTER_EMAIL=jinja-sync@lloyal.invalid \
    GIT_COMMITTER_DATE='2026-12-05T00:00:00Z' git "$@"
}

# upstream_dir prints the module's directory in the module cache, downloading
# it if needed. It runs outside lloyal's module so go.mod and go.sum are not
# touched: upstream is no dependency of lloyal's build.
upstream_dir() {
  local tmp json dir sum
  tmp="$(mktemp -d)"
  if ! json="$(cd "$tmp" && GOFLAGS='' GOWORK=off go mod download -json "$MODULE@$VERSION")"; then
    rmdir "$tmp"
    printf '%s\n' "$json" >&2
    die "cannot download $MODULE@$VERSION (go mod download failed)"
  fi
  rmdir "$tmp"
  dir="$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')"
  sum="$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Sum": "\(.*\)",*$/\1/p')"
  if [ -z "$dir" ] || [ ! -d "$dir" ]; then
    die "go mod download gave no directory for $MODULE@$VERSION"
  fi
  [ "$sum" = "$SUM" ] || die "$MODULE@$VERSION has hash $sum, want $SUM"
  printf '%s\n' "$dir"
}

# patches lists the series in order.
patches() {
  local p
  for p in "$tree"/patches/[0-9][0-9][0-9][0-9]-*.patch; do
    if [ -e "$p" ]; then printf '%s\n' "$p"; fi
  done
}

# workdir DIR [sync]: upstream as the first commit, then one commit per patch.
workdir() {
  local dir="$1" mode="${2:-}" up f p batch=()
  [ ! -e "$dir" ] || [ -z "$(ls -A "$dir")" ] || die "$dir exists and is not empty"
  up="$(upstream_dir)"
  mkdir -p "$dir"
  g -C "$dir" init -q
  for f in "${UPSTREAM_FILES[@]}"; do
    cp "$up/$f" "$dir/$f"
    chmod 0644 "$dir/$f"
  done
  g -C "$dir" add -A
  GIT_AUTHOR_NAME=jinja-sync GIT_AUTHOR_EMAIL=jinja-sync@lloyal.invalid GIT_AUTHOR_DATE='2026-12-05T00:00:00Z' \
    g -C "$dir" commit -q -m "upstream $MODULE $VERSION"
  g -C "$dir" tag upstream
  # Mail-format patches (git format-patch) go to one git am, their messages
  # becoming the commits'; a bare diff (git diff) is applied and committed
  # under its file name.
  while read -r p; do
    if head -n 1 "$p" | grep -q '^From '; then
      batch+=("$p")
      continue
    fi
    am "$dir" "$mode" "${batch[@]}"
    batch=()
    g -C "$dir" apply --index --whitespace=nowarn "$p" || die "$(basename "$p") does not apply"
    f="$(basename "$p" .patch)"
    GIT_AUTHOR_NAME=jinja-sync GIT_AUTHOR_EMAIL=jinja-sync@lloyal.invalid \
      g -C "$dir" commit -q -m "${f#[0-9][0-9][0-9][0-9]-}"
  done < <(patches)
  am "$dir" "$mode" "${batch[@]}"
}

# am DIR MODE PATCH...: git am, or how to resolve a patch that does not apply.
am() {
  local dir="$1" mode="$2"
  shift 2
  [ $# -gt 0 ] || return 0
  g -C "$dir" am -q --keep-cr --whitespace=nowarn "$@" && return 0
  if [ "$mode" = sync ]; then
    die "a patch does not apply: make a work directory ($0 workdir DIR) and resolve it there"
  fi
  die "a patch does not apply: resolve it in $dir (git -C $dir am --show-current-patch=diff; fix the files; git -C $dir add -A; git -C $dir am --continue), then $0 format $dir"
}

# format DIR: the commits after "upstream", one patch each, replace patches/.
format() {
  local dir="$1" out
  g -C "$dir" rev-parse -q --verify upstream >/dev/null || die "$dir has no upstream tag (make it with: $0 workdir $dir)"
  [ -z "$(g -C "$dir" status --porcelain)" ] || die "$dir has uncommitted changes: commit them first"
  out="$(mktemp -d)"
  g -C "$dir" format-patch -q --no-signature --no-numbered --zero-commit \
    --diff-algorithm=histogram -o "$out" upstream..HEAD
  rm -f "$tree"/patches/*.patch
  mkdir -p "$tree/patches"
  cp "$out"/*.patch "$tree/patches/" 2>/dev/null || true
  rm -rf "$out"
  echo "jinja-sync: $(patches | wc -l) patches written to engine/chat/jinja/patches"
}

# sync: regenerate the tree from upstream and the patches.
sync() {
  local f keep l
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  workdir "$work/tree" sync
  for f in "$tree"/* "$tree"/.[!.]*; do
    [ -e "$f" ] || continue
    keep=""
    for l in "${LOCAL_FILES[@]}"; do
      if [ "$(basename "$f")" = "$l" ]; then keep=1; fi
    done
    if [ -z "$keep" ]; then rm -rf "$f"; fi
  done
  while read -r f; do
    cp "$work/tree/$f" "$tree/$f"
    chmod 0644 "$tree/$f"
  done < <(g -C "$work/tree" ls-files)
  echo "jinja-sync: engine/chat/jinja is $MODULE $VERSION plus $(patches | wc -l) patches"
}

case "${1:-sync}" in
  sync) sync ;;
  workdir) [ $# -eq 2 ] || die "usage: $0 workdir DIR"; workdir "$2" ;;
  format) [ $# -eq 2 ] || die "usage: $0 format DIR"; format "$2" ;;
  *) die "usage: $0 [sync | workdir DIR | format DIR]" ;;
esac
