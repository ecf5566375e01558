/**
 * Models the built-in demo channel lists: one or two for every route the service passes through,
 * so a fresh install can try them all. The default configuration routes exactly these to it.
 */
export const DEMO_MODELS: readonly string[] = Object.freeze([
  "dall-e-2", // image variations
  "dall-e-3",
  "gpt-3.5-turbo-instruct", // completions
  "gpt-4o-mini", // chat, responses
  "gpt-4o-mini-transcribe",
  "gpt-4o-mini-tts", // speech
  "gpt-4o-transcribe", // transcriptions
  "gpt-image-1", // images, edits, image tasks
  "omni-moderation-latest", // moderations
  "text-embedding-3-large",
  "text-embedding-3-small", // embeddings
  "tts-1",
  "whisper-1", // transcriptions, translations
]);
