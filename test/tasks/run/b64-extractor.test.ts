import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { B64Extractor, extractedIndex } from "../../../src/tasks/run/b64-extractor.js";

/** Feeds `text` in chunks of `size` bytes; returns the skeleton parsed and the images. */
function extract(text: string, size: number, max = 10 * 1024 * 1024, answerBytes?: number) {
  const bytes = Buffer.from(text);
  const extractor = new B64Extractor(max, "b64_json", answerBytes);
  for (let at = 0; at < bytes.length; at += size) extractor.push(bytes.subarray(at, at + size));
  return {
    rest: JSON.parse(extractor.rest.toString("utf8")) as unknown,
    images: extractor.decoded,
  };
}

describe("taking b64_json images out of an answer as it streams", () => {
  const one = randomBytes(3001);
  const two = randomBytes(17);
  const answer = JSON.stringify({
    created: 1,
    data: [
      { b64_json: one.toString("base64"), revised_prompt: 'a "quoted" b64_json: "x"' },
      { revised_prompt: "second", b64_json: two.toString("base64") },
    ],
    usage: { input_tokens: 3, output_tokens: 5, note: "b64_json" },
  });

  it("decodes every image and keeps the rest, whatever the chunk size", () => {
    for (const size of [1, 2, 3, 5, 7, 64, 4096, answer.length]) {
      const { rest, images } = extract(answer, size);
      expect(images.map((image) => image.equals(one) || image.equals(two))).toEqual([true, true]);
      expect(images[0]!.equals(one)).toBe(true);
      expect(images[1]!.equals(two)).toBe(true);
      expect(rest).toEqual({
        created: 1,
        data: [
          { b64_json: "#b64:0", revised_prompt: 'a "quoted" b64_json: "x"' },
          { revised_prompt: "second", b64_json: "#b64:1" },
        ],
        usage: { input_tokens: 3, output_tokens: 5, note: "b64_json" },
      });
    }
  });

  it("decodes the same with the answer's length given, right or not (a buffer per image, cut to size)", () => {
    for (const hint of [answer.length, 10, answer.length * 4]) {
      for (const size of [1, 7, 4096, answer.length]) {
        const { images } = extract(answer, size, undefined, hint);
        expect(images[0]!.equals(one)).toBe(true);
        expect(images[1]!.equals(two)).toBe(true);
        expect(images[0]!.buffer.byteLength).toBeLessThan(64 * 1024);
      }
    }
  });

  it("reads escaped slashes and line breaks inside the base64, as JSON allows them", () => {
    const base64 = one.toString("base64");
    // Lines cut first, then slashes escaped: a cut never falls inside an escape.
    const escaped = base64.replace(/(.{76})/g, "$1\\n").replaceAll("/", "\\/");
    const text = `{"data":[{"b64_json":"${escaped}"}]}`;
    for (const size of [1, 3, 13, 1000]) {
      expect(extract(text, size).images[0]!.equals(one)).toBe(true);
    }
  });

  it("refuses an image over the limit while it streams, and an escape base64 cannot hold", () => {
    const text = `{"data":[{"b64_json":"${one.toString("base64")}"}]}`;
    expect(() => extract(text, 64, 1000)).toThrow(RangeError);
    expect(() => extract('{"data":[{"b64_json":"AAAA\\"AAAA"}]}', 4)).toThrow(SyntaxError);
  });

  it("knows where the answer's object closes, and keeps nothing after it", () => {
    const answerThen = (after: string) => `${answer}${after}`;
    for (const size of [1, 7, 4096, answer.length + 20]) {
      const bytes = Buffer.from(answerThen('\n{"data":[{"b64_json":"QUFB"}]}junk'));
      const extractor = new B64Extractor(10 * 1024 * 1024);
      let closedAt = -1;
      for (let at = 0; at < bytes.length; at += size) {
        extractor.push(bytes.subarray(at, at + size));
        if (extractor.complete && closedAt === -1) closedAt = Math.min(at + size, bytes.length);
      }
      // Closed in the chunk holding the answer's last byte, not before (brackets in strings).
      expect(closedAt).toBeGreaterThanOrEqual(answer.length);
      expect(closedAt - size).toBeLessThan(answer.length);
      expect(extractor.decoded).toHaveLength(2);
      expect(JSON.parse(extractor.rest.toString("utf8"))).toMatchObject({ created: 1 });
    }
  });

  it("never closes an answer that is no object or array, or one that does not close", () => {
    for (const text of ['"data"', "42", '{"data":[{"b64_json":"QUFB"}]', "]{}"]) {
      const extractor = new B64Extractor(1024);
      extractor.push(Buffer.from(text));
      expect(extractor.complete, text).toBe(false);
    }
  });

  it("names images by markers only it writes", () => {
    expect(extractedIndex("#b64:3")).toBe(3);
    expect(extractedIndex("#b64:x")).toBeUndefined();
    expect(extractedIndex("iVBORw0KGgo")).toBeUndefined();
  });
});
