#!/usr/bin/env bash
# Installs what test/support/ceph-rgw.ts starts (a one-node Ceph with a RADOS Gateway, the
# signature-checking S3 of the Ceph tests): Debian's ceph-mon, ceph-osd and radosgw, without
# recommends, quietly, as root, only when one is missing. Nothing is started or enabled: the
# tests run the daemons themselves, in a temp dir, on free ports of 127.0.0.1.
# On this project's machines (Debian 12, 2 cores) the install takes about 35 s (55
# packages, 60 MB downloaded, 265 MB on disk); when the commands are there it returns at once.
set -euo pipefail

missing=()
for tool in ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph setpriv; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "The Ceph tests need ${missing[*]} (Debian, as root: apt-get install --no-install-recommends ceph-mon ceph-osd radosgw)." >&2
  exit 1
fi
echo "installing ceph-mon, ceph-osd and radosgw for the Ceph tests..." >&2
apt-get update -qq >/dev/null
# The packages' scripts would start daemons under a service manager; none runs here, and
# the tests start their own.
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  ceph-mon ceph-osd radosgw >/dev/null
