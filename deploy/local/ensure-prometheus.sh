#!/usr/bin/env bash
# Prints the folder holding Debian's `prometheus` and `promtool` (for `make deploy-check`,
# `make observe` and the tests that run them), fetching them once when they are missing.
#
# They are unpacked from Debian's `prometheus` package (`apt-get download`, then `dpkg-deb -x`)
# into ~/.cache/rover/prometheus/<version>/ rather than installed: installing the package would
# also start a Prometheus daemon on :9090, the port `make run`'s gateway serves its metrics on.
# Binaries already on PATH are used as they are. Needs no root when the package index is current;
# a lock makes concurrent first runs safe.
set -euo pipefail

say() { printf 'rover: %s\n' "$*" >&2; }

if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
  dirname "$(command -v promtool)"
  exit 0
fi
cache="${ROVER_PROMETHEUS_CACHE:-$HOME/.cache/rover/prometheus}"
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
version="$(apt-cache policy prometheus 2>/dev/null | awk '/Candidate:/ {print $2}')"
if [ -z "$version" ] || [ "$version" = "(none)" ]; then
  if [ "$(id -u)" -eq 0 ]; then
    say "apt-get update (the prometheus package is not known yet)"
    apt-get update -qq
    version="$(apt-cache policy prometheus 2>/dev/null | awk '/Candidate:/ {print $2}')"
  fi
fi
[ -n "$version" ] && [ "$version" != "(none)" ] \
  || { say "Debian's prometheus package is not available (apt-get update, as root, may fix it)"; exit 1; }
dir="$cache/${version//[^A-Za-z0-9.+-]/_}"
if [ ! -x "$dir/usr/bin/promtool" ] || [ ! -x "$dir/usr/bin/prometheus" ]; then
  work="$(mktemp -d "$cache/fetch.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  say "fetching Debian's prometheus $version (promtool and prometheus, unpacked into $dir)"
  (cd "$work" && apt-get download -qq "prometheus=$version" 2>/dev/null) \
    || { say "apt-get download prometheus=$version failed"; exit 1; }
  dpkg-deb -x "$work"/prometheus_*.deb "$work/root"
  rm -rf "$dir"
  mkdir -p "$dir/usr"
  mv "$work/root/usr/bin" "$dir/usr/bin"
fi
echo "$dir/usr/bin"
