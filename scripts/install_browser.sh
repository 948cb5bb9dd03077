#!/usr/bin/env bash
# Install the system Chromium used by tests/test_report_browser.py (report.html checked in a
# real headless browser). Debian's `chromium` package, never a downloaded browser build.
# Idempotent: does nothing when chromium is already installed. Debian/Ubuntu, run as root (or
# with sudo available). Without it the browser tests skip, saying why.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
    echo "chromium already installed: $(chromium --version 2>/dev/null || true)"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "error: installing chromium needs root (or sudo)" >&2
        exit 1
    fi
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "error: apt-get not found; install chromium with your package manager" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium
echo "installed: $(chromium --version 2>/dev/null || true)"
