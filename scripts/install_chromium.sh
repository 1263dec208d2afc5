#!/bin/sh
# Install Debian's chromium for the browser tests (tests/test_html_reports.py); they skip, saying why, without it.
# Usage: sudo scripts/install_chromium.sh   (or as root in CI). Does nothing when chromium is already there.
set -eu
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    echo "chromium already installed: $(command -v chromium || command -v chromium-browser)"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "no apt-get here: install chromium with your package manager; the browser tests skip meanwhile" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core
command -v chromium
