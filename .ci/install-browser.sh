#!/usr/bin/env bash
# Headless Chromium for the web app's browser tests (tests/web/test_web_browser.py): Debian's own
# package, driven by Playwright for Python with executable_path=/usr/bin/chromium. Never runs
# `playwright install` (it downloads browsers from a CDN). A CJK font makes the 中文 labels legible
# in screenshots. Quiet and quick when everything is already there.
set -euo pipefail
# QKV_SKIP_BROWSER=1: no browser wanted (the browser tests then skip, saying so): install nothing
if [ "${QKV_SKIP_BROWSER:-}" = "1" ]; then
  echo "QKV_SKIP_BROWSER=1: not installing chromium; the browser tests will be skipped"
  exit 0
fi
need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
fc-list 2>/dev/null | grep -qiE 'wqy|noto.*cjk' || need+=(fonts-wqy-zenhei)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing ${need[*]} (apt) for the browser tests ..."
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
/usr/bin/chromium --version 2>/dev/null
