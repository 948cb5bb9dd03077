#!/usr/bin/env bash
# Install one Debian package when its command is missing: `install_debian_package.sh COMMAND PACKAGE`.
# Idempotent: does nothing when COMMAND is already on PATH. Debian/Ubuntu, run as root (or with
# sudo available); exits non-zero, saying why, when it cannot install.
set -euo pipefail
if [ "$#" -ne 2 ]; then
    echo "usage: install_debian_package.sh COMMAND PACKAGE" >&2
    exit 2
fi
cmd=$1
pkg=$2

if command -v "$cmd" >/dev/null 2>&1; then
    echo "$pkg already installed ($cmd found)"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "error: installing $pkg needs root (or sudo)" >&2
        exit 1
    fi
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "error: apt-get not found; install $pkg with your package manager" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "$pkg"
echo "installed: $pkg"
