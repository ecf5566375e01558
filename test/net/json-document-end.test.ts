import { describe, expect, it } from "vitest";
import { JsonDocumentEnd } from "../../src/net/json-document-end.js";

/** Where `text`'s document ends, fed in chunks of `size` bytes: an index in `text`, or -1. */
function endOf(text: string, size: number): number {
  const bytes = Buffer.from(text);
  const end = new JsonDocumentEnd();
  for (let at = 0; at < bytes.length; at += size) {
    const found = end.push(bytes.subarray(at, at + size));
    if (found !== -1) return at + found;
  }
  return -1;
}

describe("finding where a JSON answer's top-level object or array ends", () => {
  const documents = [
    '{"id":"resp_1","output":[{"type":"message","content":[]}],"usage":{"total_tokens":3}}',
    '{"text":"brackets } ] { [ in a string","quote":"a \\"quoted\\" }","slash":"\\\\"}',
    '{"escaped":"\\\\\\"}","u":"\\u007d"}',
    "[1,[2,[3]],{}]",
    ` \n\t{"long":"${"QUJD\\/".repeat(5000)}"}`,
  ];

  it("finds the closing bracket, whatever the chunk size, brackets and escapes in strings", () => {
    for (const document of documents) {
      JSON.parse(document);
      for (const size of [1, 2, 3, 5, 64, 4096, document.length]) {
        expect(
          endOf(`${document}{"after":1}junk`, size),
          `${document.slice(0, 40)} / ${size}`,
        ).toBe(Buffer.byteLength(document));
      }
    }
  });

  it("finds none in a document cut short, or in one that is no object or array", () => {
    for (const text of [
      '{"a":"}',
      '{"a":[1,2]',
      '"{}"',
      "42",
      "",
      '{"a":"\\"}',
      // Not JSON at all, with brackets in it: an HTML error page, a plain-text error.
      "<html><style>p{margin:0}</style><p>Bad gateway</p></html>",
      "error: [upstream] {timeout}",
    ]) {
      for (const size of [1, 3, 100]) expect(endOf(text, size), text).toBe(-1);
    }
  });
});
