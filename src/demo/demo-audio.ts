import type { IncomingMessage, ServerResponse } from "node:http";
import { estimateTokens } from "./demo-chat-reply.js";
import {
  encodeWav,
  pcmBytes,
  silentMp3,
  SPEECH_SAMPLE_RATE,
  synthesizeSpeech,
  wavSeconds,
} from "./demo-audio-encoders.js";
import { openEventStream, streamPieces } from "./demo-event-stream.js";
import {
  clientGoneSignal,
  DemoRequestError,
  invalidParam,
  isJsonObject,
  missingParam,
  oneOf,
  readObjectBody,
  sendBytes,
  sendJson,
} from "./demo-http-helpers.js";
import type { DemoContext, DemoHandler } from "./demo-route.js";
import { fnv1a } from "./fnv1a.js";
import { formField, readRequiredForm, type DemoForm } from "./read-demo-form.js";

/** OpenAI's limit on a speech input. */
const MAX_SPEECH_CHARS = 4096;
/** Bytes of base64 audio in one `speech.audio.delta` event. */
const SSE_AUDIO_CHUNK = 16 * 1024;
/** Bit rate assumed for an upload the demo cannot read the length of (a 128 kbit/s MP3). */
const ASSUMED_BYTES_PER_SECOND = 16_000;
/** Audio tokens a second of input counts for, in gpt-4o-transcribe's usage. */
const AUDIO_TOKENS_PER_SECOND = 10;

const SPEECH_FORMATS = ["mp3", "opus", "aac", "flac", "wav", "pcm"] as const;

/**
 * `POST /v1/audio/speech`: beeps in the rhythm of the text (see `synthesizeSpeech`). `wav` and
 * `pcm` carry them; `mp3` is silence of the same length (a real MP3 needs an encoder); `opus`,
 * `aac` and `flac` are answered as WAV with `audio/wav`, so the bytes always match their type.
 * `stream_format: "sse"` sends the audio as `speech.audio.delta` events.
 */
export const handleSpeech: DemoHandler = async (req, res, context) => {
  const gone = clientGoneSignal(res);
  const { value: body } = await readObjectBody(req);
  const { input, voice } = body;
  if (typeof input !== "string" || input.length === 0) {
    throw new DemoRequestError(400, missingParam("input"));
  }
  if (input.length > MAX_SPEECH_CHARS) {
    throw new DemoRequestError(
      400,
      invalidParam("input", `'input' must be at most ${MAX_SPEECH_CHARS} characters.`),
    );
  }
  const voiceName =
    typeof voice === "string" ? voice : isJsonObject(voice) ? String(voice.id ?? "") : "";
  if (voiceName.length === 0) throw new DemoRequestError(400, missingParam("voice"));
  const format = oneOf(body.response_format, "response_format", SPEECH_FORMATS, "mp3");
  const speed = body.speed ?? 1;
  if (typeof speed !== "number" || !(speed >= 0.25 && speed <= 4)) {
    throw new DemoRequestError(400, invalidParam("speed", "'speed' must be from 0.25 to 4."));
  }
  const sse = oneOf(body.stream_format, "stream_format", ["audio", "sse"], "audio") === "sse";

  const samples = synthesizeSpeech(input, voiceName, speed);
  const seconds = samples.length / SPEECH_SAMPLE_RATE;
  const [contentType, audio] =
    format === "mp3"
      ? ["audio/mpeg", silentMp3(seconds)]
      : format === "pcm"
        ? ["audio/pcm", pcmBytes(samples)]
        : ["audio/wav", encodeWav(samples)];
  if (!sse) {
    sendBytes(res, 200, contentType, audio);
    return;
  }
  const stream = openEventStream(res, context.streamDelayMs, gone);
  for (let at = 0; at < audio.length; at += SSE_AUDIO_CHUNK) {
    if (at > 0 && !(await stream.pause())) return;
    stream.send({
      type: "speech.audio.delta",
      audio: audio.subarray(at, at + SSE_AUDIO_CHUNK).toString("base64"),
    });
  }
  const inputTokens = estimateTokens(input);
  const outputTokens = Math.ceil(seconds * 20);
  stream.send({
    type: "speech.audio.done",
    usage: {
      input_tokens: inputTokens,
      output_tokens: outputTokens,
      total_tokens: inputTokens + outputTokens,
    },
  });
  stream.end();
};

const TRANSCRIPTION_FORMATS = [
  "json",
  "text",
  "srt",
  "verbose_json",
  "vtt",
  "diarized_json",
] as const;

/** `POST /v1/audio/transcriptions`: a made-up transcript naming the upload. */
export const handleTranscriptions: DemoHandler = (req, res, context) =>
  transcribe(req, res, context, "transcribe");

/** `POST /v1/audio/translations`: a made-up English translation naming the upload. */
export const handleTranslations: DemoHandler = (req, res, context) =>
  transcribe(req, res, context, "translate");

/** A transcript as the demo makes it up, with what the answer's shapes need. */
interface Transcript {
  task: "transcribe" | "translate";
  text: string;
  seconds: number;
  usage: unknown;
  form: DemoForm;
}

/**
 * The demo does not listen: the text says so and names the file and its length (read from a WAV
 * header, else guessed from its size). Every `response_format` is answered in its shape
 * (`text`, `srt`, `vtt` as plain text), and `stream=true` sends `transcript.text.delta` events.
 */
async function transcribe(
  req: IncomingMessage,
  res: ServerResponse,
  context: DemoContext,
  task: "transcribe" | "translate",
): Promise<void> {
  const gone = clientGoneSignal(res);
  const form = await readRequiredForm(req, "a 'file'");
  const file = form.files.find((f) => f.field === "file");
  if (!file) throw new DemoRequestError(400, missingParam("file"));
  const model = formField(form, "model") ?? "whisper-1";
  const format = oneOf(
    formField(form, "response_format"),
    "response_format",
    TRANSCRIPTION_FORMATS,
    "json",
  );
  const seconds = round2(
    Math.max(0.1, wavSeconds(file.head, file.bytes) ?? file.bytes / ASSUMED_BYTES_PER_SECOND),
  );
  const text =
    `Demo ${task === "transcribe" ? "transcript" : "translation"} of ${file.filename} ` +
    `(${seconds} seconds of audio): the demo channel does not listen, so these words are made up.`;
  const usage = usageOf(model, seconds, text, formField(form, "prompt") ?? "");
  const transcript: Transcript = { task, text, seconds, usage, form };
  if (task === "transcribe" && formField(form, "stream") === "true") {
    await streamTranscript(res, transcript, context, gone);
    return;
  }
  sendTranscript(res, format, transcript);
}

/** `stream=true`: the text in `transcript.text.delta` events, then `transcript.text.done`. */
async function streamTranscript(
  res: ServerResponse,
  { text, usage }: Transcript,
  context: DemoContext,
  gone: AbortSignal,
): Promise<void> {
  const stream = openEventStream(res, context.streamDelayMs, gone);
  for (const piece of streamPieces(text)) {
    if (!(await stream.pause())) return;
    stream.send({ type: "transcript.text.delta", delta: piece });
  }
  stream.send({ type: "transcript.text.done", text, usage });
  stream.end();
}

/** The transcript in the shape `response_format` names. */
function sendTranscript(
  res: ServerResponse,
  format: (typeof TRANSCRIPTION_FORMATS)[number],
  transcript: Transcript,
): void {
  const { task, text, usage } = transcript;
  const segments = segmentsOf(text, transcript.seconds);
  switch (format) {
    case "text":
      sendBytes(res, 200, "text/plain; charset=utf-8", text);
      return;
    case "srt":
    case "vtt":
      sendBytes(res, 200, "text/plain; charset=utf-8", subtitles(format, segments));
      return;
    case "verbose_json":
      sendJson(res, 200, verboseJson(transcript, segments));
      return;
    case "diarized_json":
      sendJson(res, 200, diarizedJson(transcript, segments));
      return;
    default:
      sendJson(res, 200, task === "translate" ? { text } : { text, usage });
  }
}

/** `verbose_json`: whisper's segments (and words, when asked for) with their timings. */
function verboseJson({ task, text, seconds, form }: Transcript, segments: Segment[]) {
  return {
    task,
    language: task === "translate" ? "english" : (formField(form, "language") ?? "english"),
    duration: seconds,
    text,
    segments: segments.map((s, id) => ({
      id,
      seek: 0,
      start: s.start,
      end: s.end,
      text: ` ${s.text}`,
      tokens: s.text.split(" ").map((word) => fnv1a(word) % 50_000),
      temperature: 0,
      avg_logprob: -0.25,
      compression_ratio: 1.2,
      no_speech_prob: 0.01,
    })),
    ...(wantsWords(form) ? { words: wordsOf(text, seconds) } : {}),
    usage: { type: "duration", seconds: Math.ceil(seconds) },
  };
}

/** `diarized_json`: the segments taken in turn by two speakers. */
function diarizedJson({ text, seconds, usage }: Transcript, segments: Segment[]) {
  return {
    task: "transcribe",
    duration: seconds,
    text,
    segments: segments.map((s, i) => ({
      type: "transcript.text.segment",
      id: `seg_${i}`,
      start: s.start,
      end: s.end,
      speaker: i % 2 === 0 ? "A" : "B",
      text: s.text,
    })),
    usage,
  };
}

/** whisper-1 bills seconds; the gpt-4o transcribe models bill tokens. */
function usageOf(model: string, seconds: number, text: string, prompt: string): unknown {
  if (model.startsWith("whisper")) return { type: "duration", seconds: Math.ceil(seconds) };
  const audioTokens = Math.ceil(seconds * AUDIO_TOKENS_PER_SECOND);
  const textTokens = estimateTokens(prompt);
  const outputTokens = estimateTokens(text);
  return {
    type: "tokens",
    input_tokens: audioTokens + textTokens,
    input_token_details: { text_tokens: textTokens, audio_tokens: audioTokens },
    output_tokens: outputTokens,
    total_tokens: audioTokens + textTokens + outputTokens,
  };
}

interface Segment {
  start: number;
  end: number;
  text: string;
}

/** The text in pieces of about ten words, spread evenly over the audio. */
function segmentsOf(text: string, seconds: number): Segment[] {
  const words = text.split(" ");
  const count = Math.ceil(words.length / 10);
  return Array.from({ length: count }, (_, i) => ({
    start: round2((seconds * i) / count),
    end: round2((seconds * (i + 1)) / count),
    text: words.slice(i * 10, (i + 1) * 10).join(" "),
  }));
}

function wordsOf(text: string, seconds: number) {
  const words = text.split(" ");
  return words.map((word, i) => ({
    word,
    start: round2((seconds * i) / words.length),
    end: round2((seconds * (i + 1)) / words.length),
  }));
}

function wantsWords(form: DemoForm): boolean {
  const granularities = [
    ...(form.fields.get("timestamp_granularities[]") ?? []),
    ...(form.fields.get("timestamp_granularities") ?? []),
  ];
  return granularities.includes("word");
}

function subtitles(format: "srt" | "vtt", segments: Segment[]): string {
  const time = (seconds: number) => {
    const ms = Math.round(seconds * 1000);
    const pad = (n: number, width = 2) => String(n).padStart(width, "0");
    const clock = `${pad(Math.floor(ms / 3_600_000))}:${pad(Math.floor(ms / 60_000) % 60)}:${pad(Math.floor(ms / 1000) % 60)}`;
    return `${clock}${format === "srt" ? "," : "."}${pad(ms % 1000, 3)}`;
  };
  const cues = segments.map(
    (s, i) =>
      `${format === "srt" ? `${i + 1}\n` : ""}${time(s.start)} --> ${time(s.end)}\n${s.text}\n`,
  );
  return `${format === "vtt" ? "WEBVTT\n\n" : ""}${cues.join("\n")}`;
}

function round2(value: number): number {
  return Math.round(value * 100) / 100;
}
