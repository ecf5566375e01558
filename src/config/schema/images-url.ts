/** S3's "safe" key characters: what a prefix may hold. */
const PREFIX = /^[A-Za-z0-9!_.*'()/-]*$/;

/** Prefixes and suffixes S3 reserves for its own bucket kinds. */
const RESERVED_STARTS = ["xn--", "sthree-", "amzn-s3-demo-"];
const RESERVED_ENDS = ["-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"];

/**
 * What is wrong with an `images.url`, or `undefined` when it is usable:
 * `memory://`, `file://<directory>`, or `s3://<bucket>[/<prefix>]` whose
 * bucket follows S3's naming rules (which R2, MinIO and Ceph share), the
 * line saying which rule it breaks.
 */
export function imagesUrlProblem(value: string): string | undefined {
  if (value === "memory://" || /^file:\/\/.+/.test(value)) return undefined;
  if (!value.startsWith("s3://")) {
    return "must be memory://, file://<directory> or s3://<bucket>[/<prefix>]";
  }
  const rest = value.slice("s3://".length);
  const slash = rest.indexOf("/");
  const bucket = slash === -1 ? rest : rest.slice(0, slash);
  const prefix = slash === -1 ? "" : rest.slice(slash + 1);
  const problem = bucketNameProblem(bucket);
  if (problem) return problem;
  if (!PREFIX.test(prefix)) {
    return (
      `the prefix "${prefix}" may hold only letters, digits, "/" and the characters ! _ . * ' ( ) -` +
      " (S3's safe key characters)"
    );
  }
  return undefined;
}

/** Which of S3's bucket naming rules `bucket` breaks, or `undefined`. */
export function bucketNameProblem(bucket: string): string | undefined {
  const named = `the bucket name "${bucket}"`;
  if (bucket === "") return "names no bucket: write s3://<bucket>[/<prefix>]";
  if (bucket.length < 3 || bucket.length > 63) {
    return `${named} breaks S3's naming rules: it must be 3 to 63 characters long (it has ${bucket.length})`;
  }
  const wrong = [...new Set(bucket.replace(/[a-z0-9.-]/g, ""))];
  if (wrong.length > 0) {
    const shown = wrong.map((char) => `"${char}"`).join(", ");
    const hint = /[A-Z]/.test(bucket) ? "; no capital letters" : "";
    return `${named} breaks S3's naming rules: only lowercase letters, digits, dots and hyphens are allowed (not ${shown})${hint}`;
  }
  if (!/^[a-z0-9]/.test(bucket) || !/[a-z0-9]$/.test(bucket)) {
    return `${named} breaks S3's naming rules: it must start and end with a lowercase letter or a digit`;
  }
  if (bucket.includes("..")) {
    return `${named} breaks S3's naming rules: it must not hold two dots in a row`;
  }
  if (/^\d{1,3}(\.\d{1,3}){3}$/.test(bucket)) {
    return `${named} breaks S3's naming rules: it must not be an IP address`;
  }
  const start = RESERVED_STARTS.find((reserved) => bucket.startsWith(reserved));
  if (start)
    return `${named} breaks S3's naming rules: names starting with "${start}" are reserved`;
  const end = RESERVED_ENDS.find((reserved) => bucket.endsWith(reserved));
  if (end) return `${named} breaks S3's naming rules: names ending with "${end}" are reserved`;
  return undefined;
}
