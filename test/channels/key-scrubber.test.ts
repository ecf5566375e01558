import { describe, expect, it } from "vitest";
import { createKeyScrubber, REDACTED } from "../../src/channels/key-scrubber.js";
import { keySpellings } from "../support/fake-upstream.js";

const KEY = "sk-proj/Echo+Key=0123456789abcdef";
const scrubber = createKeyScrubber(KEY);
const scrub = (text: string) => scrubber.scrub(Buffer.from(text)).toString();

describe("the key scrubber", () => {
  it.each(keySpellings(KEY))("replaces the spelling %s", (spelling) => {
    expect(scrub(`{"a":"x ${spelling} y"}`)).toBe(`{"a":"x ${REDACTED} y"}`);
  });

  it("replaces every occurrence and leaves other text, escapes and near misses alone", () => {
    const text = `${KEY}|\\n\\u0073k-proj|sk-proj/Echo|${KEY.slice(0, -1)}|${KEY}`;
    expect(scrub(text)).toBe(
      `${REDACTED}|\\n\\u0073k-proj|sk-proj/Echo|${KEY.slice(0, -1)}|${REDACTED}`,
    );
  });

  it("returns the very same buffer when there is nothing to scrub", () => {
    const clean = Buffer.from('{"choices":[{"text":"sk-"}]}');
    expect(scrubber.scrub(clean)).toBe(clean);
  });

  it("scrubs header values", () => {
    expect(scrubber.scrubText(`Bearer ${KEY}`)).toBe(`Bearer ${REDACTED}`);
    expect(scrubber.scrubText("req_123")).toBe("req_123");
  });

  it("leaves short keys alone (they would match ordinary text)", () => {
    expect(createKeyScrubber("abc").scrub(Buffer.from("abc")).toString()).toBe("abc");
  });

  it("finds a key split at any byte across stream chunks, holding back only a possible start", () => {
    for (const spelling of keySpellings(KEY)) {
      const text = `data: {"a":"${spelling}"}\n\n`;
      for (let cut = 1; cut < text.length; cut += 1) {
        const stream = scrubber.stream();
        const out =
          stream.push(Buffer.from(text.slice(0, cut))).toString() +
          stream.push(Buffer.from(text.slice(cut))).toString() +
          stream.flush().toString();
        expect(out).toBe(`data: {"a":"${REDACTED}"}\n\n`);
      }
    }
  });

  it("passes chunks that end in a newline on at once, unchanged", () => {
    const stream = scrubber.stream();
    const chunk = Buffer.from('data: {"content":"sk- is how keys start"}\n\n');
    expect(stream.push(chunk)).toBe(chunk);
    const partial = Buffer.from('data: {"content":"sk-pro');
    expect(stream.push(partial).toString()).toBe('data: {"content":"');
    expect(stream.push(Buffer.from('ud"}\n\n')).toString()).toBe('sk-proud"}\n\n');
  });
});
