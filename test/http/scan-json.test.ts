import { describe, expect, it } from "vitest";
import { scanJson, valueAt } from "../../src/http/scan-json.js";

const accepts = (bytes: Buffer) => scanJson(bytes, [], 64) !== undefined;
const parses = (bytes: Buffer) => {
  try {
    JSON.parse(bytes.toString("utf8"));
    return true;
  } catch {
    return false;
  }
};

/** A small deterministic generator (mulberry32), so a failure can be replayed. */
function random(seed: number): (below: number) => number {
  let state = seed;
  return (below) => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * below);
  };
}

const SEEDS = [
  '{"id":"x","model":"gpt","usage":{"prompt_tokens":9,"completion_tokens":1.5e3},"a":[1,-0,0.5,true,false,null,{"b":"\\u00e9\\n"}]}',
  '[1,2,{"a":"b"}]',
  '"text"',
  "-0.0e-5",
  ' {"a" : [ ] } ',
  '{"k":"\\"\\\\\\/\\b\\f\\n\\r\\t"}',
  '{"k":"é日本"}',
];
const ALPHABET = ' \t\n\r{}[]":,\\/-+.0123456789eEabfnrtulsx\u00e9\u0001\u007f';

describe("scanJson", () => {
  it("accepts exactly what JSON.parse accepts, over many mutated texts", () => {
    const next = random(40);
    const disagreements: string[] = [];
    for (let round = 0; round < 50_000; round += 1) {
      let text = SEEDS[next(SEEDS.length)] as string;
      for (let edit = 1 + next(3); edit > 0; edit -= 1) {
        const at = next(text.length + 1);
        const char = ALPHABET[next(ALPHABET.length)] as string;
        const kind = next(3);
        text =
          kind === 0
            ? text.slice(0, at) + char + text.slice(at)
            : text.slice(0, at) + (kind === 1 ? "" : char) + text.slice(at + 1);
      }
      const bytes = Buffer.from(text);
      if (accepts(bytes) !== parses(bytes)) disagreements.push(text);
    }
    expect(disagreements).toEqual([]);
  });

  it("refuses a byte order mark, bytes out of strings and empty text; takes any byte in a string", () => {
    for (const bytes of [[0xef, 0xbb, 0xbf, 0x7b, 0x7d], [0xff], [0x5b, 0x80, 0x5d], []]) {
      expect(accepts(Buffer.from(bytes))).toBe(false);
    }
    expect(accepts(Buffer.from([0x22, 0xff, 0xc3, 0x22]))).toBe(true);
  });

  it("decides nothing past its depth: the caller parses such a text itself", () => {
    expect(scanJson(Buffer.from("[".repeat(5) + "]".repeat(5)), [], 4)).toBeUndefined();
    expect(scanJson(Buffer.from("[".repeat(4) + "]".repeat(4)), [], 4)).toBeDefined();
  });

  it("finds the last of duplicate members, keys with escapes, and counts model keys", () => {
    const text = '{"model":"a","x":{"model":"inner"},"mo\\u0064el":"b\\u00e9","MODEL":1,"n":-2e1}';
    const bytes = Buffer.from(text);
    const scanned = scanJson(bytes, ["model", "n", "none"], 64);
    if (!scanned) throw new Error("not scanned");
    expect(scanned.modelKeys).toBe(3);
    const at = (i: number) =>
      valueAt(bytes, scanned.starts[i] as number, scanned.ends[i] as number);
    expect(at(0)).toBe(JSON.parse(text).model);
    expect(at(1)).toBe(-20);
    expect(scanned.starts[2]).toBe(-1);
  });
});
