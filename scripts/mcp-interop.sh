#!/usr/bin/env bash
# Installs the third-party MCP servers the abilities interop tests run: the
# reference filesystem and everything servers from npm, pinned, into a cache folder (default
# ${XDG_CACHE_HOME:-~/.cache}/lloyal/mcp-interop). Prints the export line the
# test reads. Without node/npm, or without the registry, it says so and
# exits 0: the test then skips with a message.
set -euo pipefail
pkg="@modelcontextprotocol/server-filesystem@2026.8.31"
# The protocol's reference test server: instructions, logging, structured
# results with an output schema.
pkg_everything="@modelcontextprotocol/server-everything@2026.8.31"
dir="${LLOYAL_MCP_INTEROP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lloyal/mcp-interop}"
entry="$dir/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "mcp-interop: node and npm are not installed: the interop test will skip" >&2
  exit 0
fi
everything="$dir/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
if [ ! -f "$entry" ] || [ ! -f "$everything" ]; then
  mkdir -p "$dir"
  if ! npm install --prefix "$dir" --no-audit --no-fund --silent "$pkg" "$pkg_everything" >&2; then
    echo "mcp-interop: could not install $pkg and $pkg_everything: the interop tests will skip" >&2
    exit 0
  fi
fi
echo "export LLOYAL_MCP_FILESYSTEM=$entry"
echo "export LLOYAL_MCP_EVERYTHING=$everything"
