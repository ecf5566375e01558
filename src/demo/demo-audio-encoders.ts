import { fnv1a } from "./fnv1a.js";

/** OpenAI's speech audio: 24 kHz, 16-bit, mono. */
export const SPEECH_SAMPLE_RATE = 24_000;
/** Longest speech the demo makes, so a long input cannot cost much. */
const MAX_SPEECH_SECONDS = 30;

/**
 * Made-up speech for a text: one soft beep per word (longer words, longer beeps), at a pitch
 * picked by the voice, with pauses between words. It carries the rhythm of the text and proves
 * real audio came back, without pretending to be a voice.
 *
 * @param speed OpenAI's `speed` (0.25 to 4): durations are divided by it.
 * @returns 16-bit samples at {@link SPEECH_SAMPLE_RATE}
 */
export function synthesizeSpeech(text: string, voice: string, speed = 1): Int16Array {
  const ms = (value: number) => Math.round((value / speed / 1000) * SPEECH_SAMPLE_RATE);
  const words = text.match(/\S+/g) ?? [];
  const pitch = 140 + (fnv1a(voice) % 160);
  const max = MAX_SPEECH_SECONDS * SPEECH_SAMPLE_RATE;
  const lead = ms(100);
  const beeps = words.map((word) => ({
    length: ms(Math.min(500, Math.max(80, word.length * 60))),
    frequency: pitch * (1 + ((fnv1a(word) % 7) - 3) * 0.03),
  }));
  const gap = ms(70);
  const total = Math.min(max, lead * 2 + beeps.reduce((sum, beep) => sum + beep.length + gap, 0));
  const samples = new Int16Array(total);
  const ramp = ms(8) || 1;
  let at = lead;
  for (const { length, frequency } of beeps) {
    const step = (2 * Math.PI * frequency) / SPEECH_SAMPLE_RATE;
    for (let i = 0; i < length && at + i < total; i++) {
      const envelope = Math.min(1, i / ramp, (length - i) / ramp);
      samples[at + i] = Math.round(Math.sin(i * step) * envelope * 0.25 * 32767);
    }
    at += length + gap;
    if (at >= total) break;
  }
  return samples;
}

/** A RIFF/WAVE file of 16-bit mono PCM samples. */
export function encodeWav(samples: Int16Array, sampleRate = SPEECH_SAMPLE_RATE): Buffer {
  const data = pcmBytes(samples);
  const header = Buffer.alloc(44);
  header.write("RIFF", 0, "latin1");
  header.writeUInt32LE(36 + data.length, 4);
  header.write("WAVE", 8, "latin1");
  header.write("fmt ", 12, "latin1");
  header.writeUInt32LE(16, 16); // fmt chunk size
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // mono
  header.writeUInt32LE(sampleRate, 24);
  header.writeUInt32LE(sampleRate * 2, 28); // byte rate
  header.writeUInt16LE(2, 32); // block align
  header.writeUInt16LE(16, 34); // bits per sample
  header.write("data", 36, "latin1");
  header.writeUInt32LE(data.length, 40);
  return Buffer.concat([header, data]);
}

/** Raw little-endian 16-bit samples: OpenAI's `pcm` format. */
export function pcmBytes(samples: Int16Array): Buffer {
  const bytes = Buffer.alloc(samples.length * 2);
  for (let i = 0; i < samples.length; i++) bytes.writeInt16LE(samples[i]!, i * 2);
  return bytes;
}

/**
 * MPEG-1 Layer III, 32 kbit/s, 32 kHz, mono: 144 bytes a frame, 1152 samples (36 ms). A frame
 * whose side information is all zero carries no spectral data and decodes to silence, so a
 * valid MP3 needs no encoder.
 */
const MP3_FRAME_HEADER = [0xff, 0xfb, 0x18, 0xc4];
const MP3_FRAME_BYTES = 144;
const MP3_FRAME_SECONDS = 1152 / 32_000;

/** A valid MP3 of silence lasting about `seconds`: what the demo answers for `mp3`. */
export function silentMp3(seconds: number): Buffer {
  const frames = Math.max(1, Math.ceil(seconds / MP3_FRAME_SECONDS));
  const mp3 = Buffer.alloc(frames * MP3_FRAME_BYTES);
  for (let f = 0; f < frames; f++) mp3.set(MP3_FRAME_HEADER, f * MP3_FRAME_BYTES);
  return mp3;
}

/** The length of a WAV file's sound, from its header and size; `undefined` for anything else. */
export function wavSeconds(head: Buffer, bytes: number): number | undefined {
  if (head.length < 44 || head.toString("latin1", 0, 4) !== "RIFF") return undefined;
  if (head.toString("latin1", 8, 12) !== "WAVE" || head.toString("latin1", 12, 16) !== "fmt ") {
    return undefined;
  }
  const byteRate = head.readUInt32LE(28);
  return byteRate > 0 ? Math.max(0, bytes - 44) / byteRate : undefined;
}
