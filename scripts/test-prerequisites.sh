#!/usr/bin/env bash
# Installs what the test suite needs beyond Node, PostgreSQL and Redis, so that the README's
# test command passes on a fresh machine: today that is Debian's Chromium, which the
# dashboard's and the portal's browser tests drive. `npm test` runs this first (pretest).
set -euo pipefail

chromium="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ -x "$chromium" ]; then exit 0; fi

if [ -n "${CHROMIUM_PATH:-}" ]; then
  echo "CHROMIUM_PATH=$CHROMIUM_PATH is not an executable" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "the browser tests need Chromium at /usr/bin/chromium (or set CHROMIUM_PATH), and this machine has no apt-get to install it" >&2
  exit 1
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if ! sudo -n true 2>/dev/null; then
    echo "the browser tests need Chromium: run 'sudo apt-get install chromium' once, or set CHROMIUM_PATH" >&2
    exit 1
  fi
  sudo="sudo -n"
fi
echo "installing Debian's chromium for the browser tests" >&2
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >&2
