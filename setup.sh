#!/usr/bin/env bash
# Create .venv and install everything BiTA, its app and its tests need (idempotent; safe to rerun).
set -euo pipefail
cd "$(dirname "$0")"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q torch==2.13.0
.venv/bin/python -m pip install -q -r requirements.txt
.venv/bin/python -m pip install -q --no-deps -r requirements-nodeps.txt
# The browser test drives Debian's Chromium through Playwright (Playwright's own browser download is not used).
if [ ! -x /usr/bin/chromium ]; then
    as_root=""; [ "$(id -u)" -eq 0 ] || as_root="sudo"
    $as_root apt-get update -q && $as_root apt-get install -y -q --no-install-recommends chromium
fi
