/**
 * Models the built-in demo channel answers for. The default configuration routes exactly these to
 * it, so a fresh install can try chat, synchronous images and image tasks (`gpt-image-1`).
 */
export const DEMO_MODELS: readonly string[] = Object.freeze([
  "dall-e-3",
  "gpt-4o-mini",
  "gpt-image-1",
]);
