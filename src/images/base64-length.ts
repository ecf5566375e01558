/** Characters of the base64 of `bytes` bytes (padded). */
export function base64Length(bytes: number): number {
  return Math.ceil(bytes / 3) * 4;
}
