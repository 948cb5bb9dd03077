#!/usr/bin/env bash
# Install the system package used by grpo_research.sandbox (bubblewrap). Idempotent. Without
# bubblewrap the sandbox falls back to `unshare` (util-linux, needs root) or to no isolation at all.
set -euo pipefail
exec bash "$(dirname "$0")/install_debian_package.sh" bwrap bubblewrap
