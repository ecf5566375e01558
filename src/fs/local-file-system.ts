import { statfsSync } from "node:fs";
import { dirname, resolve } from "node:path";

/*
 * File systems whose calls are served from this machine's memory or disks
 * (statfs's f_type, from Linux's magic.h): ext2/3/4, XFS, Btrfs, tmpfs,
 * overlayfs (a container's own layer), ZFS, F2FS, bcachefs, ramfs. A network
 * file system (NFS, CephFS, EFS, SMB, FUSE mounts such as s3fs) is none of them.
 */
const LOCAL_TYPES = new Set([
  0xef53, 0x58465342, 0x9123683e, 0x01021994, 0x794c7630, 0x2fc12fc1, 0xf2f52010, 0xca451a4e,
  0x858458f6,
]);

/**
 * Whether `path` (or, while it does not exist yet, its nearest existing
 * parent) lies on a local file system, where a small file's calls take
 * microseconds and may run on the event loop. False when it cannot tell
 * (another platform, an unknown type): the caller then keeps every call on
 * the thread pool.
 */
export function isLocalFileSystem(path: string): boolean {
  let at = resolve(path);
  for (;;) {
    try {
      return LOCAL_TYPES.has(Number(statfsSync(at).type));
    } catch (err) {
      const parent = dirname(at);
      if ((err as NodeJS.ErrnoException).code !== "ENOENT" || parent === at) return false;
      at = parent;
    }
  }
}
