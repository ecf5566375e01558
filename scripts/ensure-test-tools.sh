#!/usr/bin/env bash
# Runs before `npm test`, so that `npm ci && npm test` works on a fresh machine:
# - the metrics tests scrape the service with a real Prometheus and lint with promtool;
# - the Redis store, queue and replica tests need a Redis on 127.0.0.1:6379;
# - the README's tour runs its curl commands (test/docs/readme-snippets.test.ts);
# - the web console's tests drive Debian's Chromium (/usr/bin/chromium) with playwright-core.
# On a fresh Debian machine (as root) what is missing is installed or started here.
set -euo pipefail

can_install() { [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; }
apt_updated=""
apt_install() {
  if [ -z "$apt_updated" ]; then
    apt-get update -qq >/dev/null
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
  if can_install; then
    echo "installing prometheus (promtool) for the metrics tests..." >&2
    apt_install prometheus
  else
    echo "The metrics tests need prometheus and promtool on PATH (Debian: apt-get install prometheus)." >&2
    exit 1
  fi
fi

if ! command -v curl >/dev/null 2>&1; then
  if can_install; then
    echo "installing curl for the README's tour..." >&2
    apt_install curl
  else
    echo "The README test runs curl (Debian: apt-get install curl)." >&2
    exit 1
  fi
fi

if [ ! -x /usr/bin/chromium ]; then
  if can_install; then
    echo "installing chromium for the web console's browser tests..." >&2
    apt_install chromium
  else
    echo "The web console's tests need Chromium at /usr/bin/chromium (Debian: apt-get install chromium)." >&2
    exit 1
  fi
fi

redis_up() { (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null; }
if ! redis_up; then
  if ! command -v redis-server >/dev/null 2>&1; then
    if can_install; then
      echo "installing redis-server for the Redis tests..." >&2
      apt_install redis-server
    else
      echo "The Redis tests need a Redis on 127.0.0.1:6379 (Debian: apt-get install redis-server)." >&2
      exit 1
    fi
  fi
  echo "starting redis-server on 127.0.0.1:6379 for the Redis tests (nothing saved to disk)..." >&2
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null
  for _ in $(seq 1 50); do redis_up && break; sleep 0.1; done
  redis_up || { echo "redis-server did not start on 127.0.0.1:6379" >&2; exit 1; }
fi
