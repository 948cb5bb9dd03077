#!/usr/bin/env bash
# Install the system Chromium used by tests/test_report_browser.py (report.html checked in a real
# headless browser): Debian's `chromium` package, never a downloaded browser build. Idempotent.
# Without it the browser tests skip, saying why.
set -euo pipefail
exec bash "$(dirname "$0")/install_debian_package.sh" chromium chromium
