/** The most images one OpenAI image request asks for. */
const MAX_IMAGES = 10;

/**
 * How many images an image request's stream (`stream: true`) delivers, from
 * its `n` as the body gives it: absent or `null` is OpenAI's default, one.
 * `undefined` when `n` is not a count the channel would accept as it is (it
 * then refuses the request, or answers in a way not counted on).
 */
export function streamImageCount(n: unknown): number | undefined {
  if (n === undefined || n === null) return 1;
  return Number.isInteger(n) && (n as number) >= 1 && (n as number) <= MAX_IMAGES
    ? (n as number)
    : undefined;
}

/**
 * {@link streamImageCount} of a form's `n` field (`FormUpload.nField`): its
 * text as a count, `undefined` when that is not known.
 */
export function formStreamImageCount(n: string | undefined | null): number | undefined {
  if (n === null) return undefined;
  if (n === undefined) return 1;
  const text = n.trim();
  return /^\d{1,2}$/.test(text) ? streamImageCount(Number(text)) : undefined;
}
