#!/usr/bin/env bash
# Install Debian's chromium for the browser tests (tests/test_browser.py drives it through Playwright's
# Python API). Never fails its caller: where chromium cannot be installed the tests skip and say why.
set -u
found=$(command -v chromium || command -v chromium-browser || true)
if [ -n "$found" ]; then
    echo "browser tests: using $found"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "browser tests: no apt-get on this machine; install chromium by hand or they skip"
    exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo="sudo -n"
    else
        echo "browser tests: not root and no password-less sudo; run 'apt-get install chromium' or they skip"
        exit 0
    fi
fi
export DEBIAN_FRONTEND=noninteractive
# A fresh package list first: installing from a stale one fails on this image ("unauthenticated packages").
$sudo apt-get update -qq || echo "browser tests: apt-get update failed"
if $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null; then
    echo "browser tests: installed $(command -v chromium)"
else
    echo "browser tests: apt-get install chromium failed; they will skip"
fi
exit 0
