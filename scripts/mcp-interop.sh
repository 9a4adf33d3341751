#!/usr/bin/env bash
# Installs the third-party MCP server the abilities interop test runs: the
# reference filesystem server from npm, pinned, into a cache folder (default
# ${XDG_CACHE_HOME:-~/.cache}/lloyal/mcp-interop). Prints the export line the
# test reads. Without node/npm, or without the registry, it says so and
# exits 0: the test then skips with a message.
set -euo pipefail
pkg="@modelcontextprotocol/server-filesystem@2026.8.31"
dir="${LLOYAL_MCP_INTEROP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lloyal/mcp-interop}"
entry="$dir/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "mcp-interop: node and npm are not installed: the interop test will skip" >&2
  exit 0
fi
if [ ! -f "$entry" ]; then
  mkdir -p "$dir"
  if ! npm install --prefix "$dir" --no-audit --no-fund --silent "$pkg" >&2; then
    echo "mcp-interop: could not install $pkg: the interop test will skip" >&2
    exit 0
  fi
fi
echo "export LLOYAL_MCP_FILESYSTEM=$entry"
