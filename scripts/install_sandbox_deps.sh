#!/usr/bin/env bash
# Install the system packages used by grpo_research.sandbox (bubblewrap).
# Idempotent: does nothing when bwrap is already installed.  Debian/Ubuntu, run as root
# (or with sudo available).  Without bubblewrap the sandbox falls back to `unshare`
# (util-linux, needs root) or to no isolation at all.
set -euo pipefail

if command -v bwrap >/dev/null 2>&1; then
    echo "bubblewrap already installed: $(bwrap --version)"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "error: installing bubblewrap needs root (or sudo)" >&2
        exit 1
    fi
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "error: apt-get not found; install bubblewrap with your package manager" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends bubblewrap
echo "installed: $(bwrap --version)"
