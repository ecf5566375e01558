/**
 * A ZIP archive of files stored as they are (method 0, STORE): the images
 * are PNG, JPEG or WebP, already compressed, so deflating them again would
 * gain nothing and cost a dependency. Names are UTF-8 (flag bit 11). No
 * ZIP64: an archive stays under 4 GiB, far above a task's images.
 */

/** One file of the archive. */
export interface ZipEntry {
  name: string;
  bytes: Uint8Array;
  /** Its time in the archive (local time, as ZIP keeps it); default now. */
  modified?: Date;
}

let table: Uint32Array | undefined;

/** CRC-32 (IEEE 802.3, the one ZIP and PNG use) of `bytes`. */
export function crc32(bytes: Uint8Array): number {
  if (!table) {
    table = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      table[n] = c >>> 0;
    }
  }
  let crc = 0xffffffff;
  for (const byte of bytes) crc = table[(crc ^ byte) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

/** MS-DOS time and date, as ZIP headers keep them (2-second steps, from 1980). */
function dosTime(date: Date): { time: number; date: number } {
  const year = Math.min(Math.max(date.getFullYear(), 1980), 2107);
  return {
    time: (date.getHours() << 11) | (date.getMinutes() << 5) | (date.getSeconds() >> 1),
    date: ((year - 1980) << 9) | ((date.getMonth() + 1) << 5) | date.getDate(),
  };
}

const VERSION = 20; // 2.0: what a stored file with a UTF-8 name needs
const UTF8_NAMES = 0x0800;
const MADE_BY_UNIX = (3 << 8) | VERSION;
/** A regular file, rw-r--r--, in the high half as Unix hosts keep it. */
const REGULAR_FILE = (0o100644 << 16) >>> 0;

/** The archive's bytes: each file's local header and data, then the central directory. */
export function zipStore(entries: readonly ZipEntry[]): Uint8Array<ArrayBuffer> {
  const encoder = new TextEncoder();
  const files = entries.map((entry) => ({
    name: encoder.encode(entry.name),
    bytes: entry.bytes,
    crc: crc32(entry.bytes),
    when: dosTime(entry.modified ?? new Date()),
    offset: 0,
  }));
  const localSize = files.reduce((sum, f) => sum + 30 + f.name.length + f.bytes.length, 0);
  const centralSize = files.reduce((sum, f) => sum + 46 + f.name.length, 0);
  if (localSize + centralSize + 22 > 0xffffffff || files.length > 0xffff) {
    throw new RangeError("Too large for a ZIP archive without ZIP64.");
  }
  const out = new Uint8Array(localSize + centralSize + 22);
  const view = new DataView(out.buffer);
  let at = 0;
  const u16 = (value: number) => {
    view.setUint16(at, value, true);
    at += 2;
  };
  const u32 = (value: number) => {
    view.setUint32(at, value, true);
    at += 4;
  };
  const bytes = (value: Uint8Array) => {
    out.set(value, at);
    at += value.length;
  };
  /** The fields a local header and a central directory entry share, from "version needed". */
  const common = (f: (typeof files)[number]) => {
    u16(VERSION);
    u16(UTF8_NAMES);
    u16(0); // stored
    u16(f.when.time);
    u16(f.when.date);
    u32(f.crc);
    u32(f.bytes.length); // compressed: the same, stored
    u32(f.bytes.length);
    u16(f.name.length);
    u16(0); // no extra field
  };
  for (const f of files) {
    f.offset = at;
    u32(0x04034b50);
    common(f);
    bytes(f.name);
    bytes(f.bytes);
  }
  const centralStart = at;
  for (const f of files) {
    u32(0x02014b50);
    // Made by Unix: unzip would read an MS-DOS name as code page 437, whatever the UTF-8 flag says.
    u16(MADE_BY_UNIX);
    common(f);
    u16(0); // no comment
    u16(0); // disk 0
    u16(0); // internal attributes
    u32(REGULAR_FILE);
    u32(f.offset);
    bytes(f.name);
  }
  u32(0x06054b50);
  u16(0);
  u16(0);
  u16(files.length);
  u16(files.length);
  u32(centralSize);
  u32(centralStart);
  u16(0); // no comment
  return out;
}
