#!/usr/bin/env bash
# Install the headless browser the dashboard's tests drive: Debian's chromium and its
# chromedriver (/usr/bin/chromium, /usr/bin/chromedriver). Idempotent: nothing happens when both
# are installed; `apt-get update` runs only when the package lists do not know chromium yet.
# Needs root (or sudo without a password); says so and stops otherwise.
set -euo pipefail

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    sudo="sudo -n"
  else
    echo "error: installing chromium and chromium-driver needs root; run this script as root" \
      "or install them yourself (apt-get install chromium chromium-driver)" >&2
    exit 2
  fi
fi
export DEBIAN_FRONTEND=noninteractive
if ! apt-cache show chromium-driver >/dev/null 2>&1; then
  $sudo apt-get update -qq
fi
$sudo apt-get install -y -qq chromium chromium-driver >/tmp/browser-install.log 2>&1 || {
  cat /tmp/browser-install.log >&2
  echo "error: apt-get install chromium chromium-driver failed (log above)" >&2
  exit 1
}
echo "chromium $(/usr/bin/chromium --version 2>/dev/null | awk '{print $2}') and chromedriver ready"
