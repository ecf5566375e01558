import { describe, expect, it } from "vitest";
import {
  encodeWav,
  pcmBytes,
  silentMp3,
  SPEECH_SAMPLE_RATE,
  synthesizeSpeech,
  wavSeconds,
} from "../../src/demo/demo-audio-encoders.js";

describe("synthesizeSpeech", () => {
  it("grows with the text, shrinks with speed, and stops at 30 seconds", () => {
    const short = synthesizeSpeech("hello", "alloy");
    const long = synthesizeSpeech("hello there, how are you today", "alloy");
    expect(long.length).toBeGreaterThan(short.length);
    expect(synthesizeSpeech("hello there", "alloy", 2).length).toBeLessThan(
      synthesizeSpeech("hello there", "alloy", 1).length,
    );
    expect(synthesizeSpeech("word ".repeat(2000), "alloy").length).toBe(30 * SPEECH_SAMPLE_RATE);
  });

  it("is audible, and pitched by the voice", () => {
    const alloy = synthesizeSpeech("hello", "alloy");
    expect(Math.max(...alloy)).toBeGreaterThan(4000);
    expect(
      Buffer.from(synthesizeSpeech("hello", "echo").buffer).equals(Buffer.from(alloy.buffer)),
    ).toBe(false);
  });
});

describe("encodeWav", () => {
  it("writes a canonical 16-bit mono PCM header that wavSeconds reads back", () => {
    const samples = Int16Array.from([0, 1000, -1000, 32767, -32768]);
    const wav = encodeWav(samples, 8000);
    expect(wav.length).toBe(44 + 10);
    expect(wav.toString("latin1", 0, 4)).toBe("RIFF");
    expect(wav.readUInt32LE(4)).toBe(wav.length - 8);
    expect(wav.toString("latin1", 8, 16)).toBe("WAVEfmt ");
    expect(wav.readUInt16LE(20)).toBe(1); // PCM
    expect(wav.readUInt16LE(22)).toBe(1); // mono
    expect(wav.readUInt32LE(24)).toBe(8000);
    expect(wav.readUInt32LE(28)).toBe(16000);
    expect(wav.readUInt16LE(34)).toBe(16);
    expect(wav.toString("latin1", 36, 40)).toBe("data");
    expect(wav.subarray(44).equals(pcmBytes(samples))).toBe(true);
    expect(wav.readInt16LE(44 + 6)).toBe(32767);
    expect(wavSeconds(wav.subarray(0, 64), 44 + 16000 * 3)).toBe(3);
    expect(wavSeconds(Buffer.alloc(64), 1000)).toBeUndefined();
  });
});

describe("silentMp3", () => {
  it("is whole MPEG-1 Layer III frames, each with its header and no audio data", () => {
    const mp3 = silentMp3(1);
    expect(mp3.length % 144).toBe(0);
    const frames = mp3.length / 144;
    expect(frames).toBe(Math.ceil(1 / (1152 / 32000)));
    for (let f = 0; f < frames; f++) {
      const frame = mp3.subarray(f * 144, (f + 1) * 144);
      // sync, MPEG-1, Layer III, no CRC | 32 kbit/s, 32 kHz | mono
      expect([...frame.subarray(0, 4)]).toEqual([0xff, 0xfb, 0x18, 0xc4]);
      expect(frame.subarray(4).every((byte) => byte === 0)).toBe(true);
    }
    expect(silentMp3(0).length).toBe(144);
  });
});
