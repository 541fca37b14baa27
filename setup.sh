#!/usr/bin/env bash
# Create .venv and install everything BiTA, its app and its tests need (idempotent; safe to rerun).
# The app alone needs requirements.txt (what a Space installs); this installs requirements-dev.txt.
set -euo pipefail
cd "$(dirname "$0")"
# requirements.txt names PyTorch's CPU index; where it cannot be reached (an offline mirror, CI),
# skip it after one try rather than five with back-off for every package.
export PIP_RETRIES="${PIP_RETRIES:-1}"
[ -x .venv/bin/python ] || python3 -m venv .venv
# torch first, from the default index: on a Linux machine with a GPU that is the CUDA build, which
# requirements.txt's CPU index then leaves in place.
.venv/bin/python -m pip install -q torch==2.13.0
.venv/bin/python -m pip install -q -r requirements-dev.txt
.venv/bin/python -m pip install -q --no-deps -r requirements-nodeps.txt
# The browser test drives Debian's Chromium through Playwright (Playwright's own browser download is not used).
if [ ! -x /usr/bin/chromium ]; then
    as_root=""; [ "$(id -u)" -eq 0 ] || as_root="sudo"
    $as_root apt-get update -q && $as_root apt-get install -y -q --no-install-recommends chromium
fi
