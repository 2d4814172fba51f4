#!/usr/bin/env bash
# Installs the browser the dashboard's end-to-end tests drive (tests/web): Debian's `chromium`.
#
# Why Debian's package and not `playwright install`: that command downloads a browser build from a
# CDN this environment cannot reach. Playwright's Python package drives any recent Chromium through
# `executable_path`, so the distribution's browser is enough. Idempotent: does nothing when a
# `chromium` is already on PATH. Needs root (or sudo) for apt-get.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
  echo "chromium: $(command -v chromium) ($(chromium --version 2>/dev/null || echo 'version unknown'))"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "setup_browser.sh: chromium is missing and this is not root; install it with: apt-get install chromium" >&2
    exit 2
  fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# fonts-liberation: readable text in screenshots; chromium pulls in the libraries it needs.
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null
echo "chromium: $(command -v chromium) ($(chromium --version 2>/dev/null || echo 'installed'))"
