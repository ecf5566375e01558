#!/usr/bin/env bash
# Runs before `npm test`: the metrics test scrapes the service with a real
# Prometheus and lints with promtool. On a fresh Debian machine (as root) they
# are installed here, so `npm ci && npm test` works as the README says.
set -euo pipefail
if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing prometheus (promtool) for the metrics tests..." >&2
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null
  exit 0
fi
echo "The metrics tests need prometheus and promtool on PATH (Debian: apt-get install prometheus)." >&2
exit 1
