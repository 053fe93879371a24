#!/usr/bin/env bash
# Makes sure Debian's Chromium is installed for the console's browser test (tests/it/console.rs,
# driven by playwright-core with executablePath /usr/bin/chromium — no browser is ever downloaded
# from a hub). Installs the `chromium` package with apt-get when it is missing; runs `apt-get update`
# only if the package is not known yet. Idempotent: with Chromium present it changes nothing.
set -euo pipefail

say() { printf 'rover: %s\n' "$*" >&2; }
chromium=${ROVER_CHROMIUM:-/usr/bin/chromium}

if [ -x "$chromium" ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  say "Chromium ($chromium) is missing and this is not root; install it with: sudo apt-get install -y chromium"
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  say "Chromium ($chromium) is missing and there is no apt-get; install Debian's chromium package"
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! apt-cache show chromium >/dev/null 2>&1; then
  say "apt-get update (the chromium package is not known yet)"
  apt-get update -qq
fi
say "installing Debian's chromium (apt-get install -y chromium)"
apt-get install -y -qq --no-install-recommends chromium >/dev/null
if [ ! -x "$chromium" ]; then
  say "apt-get installed chromium but $chromium is still missing"
  exit 1
fi
say "Chromium is installed: $("$chromium" --version 2>/dev/null || echo "$chromium")"
