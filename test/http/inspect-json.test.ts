import { describe, expect, it } from "vitest";
import { ServiceError } from "../../src/errors/service-error.js";
import { parseJson } from "../../src/http/inspect-json.js";

const parse = (text: string, depth?: number) => parseJson(Buffer.from(text), depth);

describe("parseJson", () => {
  it("counts the top-level keys that fold to model, in any spelling", () => {
    expect(parse('{"model":"a"}').modelKeys).toBe(1);
    expect(parse('{"model":"a","MODEL":"b"}').modelKeys).toBe(2);
    expect(parse('{"model":"a","model":"b"}').modelKeys).toBe(2);
    expect(parse('{"model":"a","mod\\u0065L":"b"}').modelKeys).toBe(2);
    expect(parse('{"\\u004D\\u004f\\u0044\\u0045\\u004C":"a"}').modelKeys).toBe(1);
    expect(
      parse('{"models":"a","mode":"b","x":{"model":"c"},"y":["model"],"model":"d"}').modelKeys,
    ).toBe(1);
    expect(parse('{"a":"\\"model\\"","model":"d"}').modelKeys).toBe(1);
    expect(parse('{"a":"model","model":"d"}').modelKeys).toBe(1);
  });

  it("counts the same in bodies large enough to be pre-checked natively", () => {
    const pad = `"pad":"${"x".repeat(20_000)}"`;
    const count = (keys: string) => parse(`{${pad},${keys}}`).modelKeys;
    expect(count('"model":"a"')).toBe(1);
    expect(count('"model":"a","MODEL":"b"')).toBe(2);
    expect(count('"model":"a","model":"b"')).toBe(2);
    expect(count('"model":"a","mod\\u0065l":"b"')).toBe(2);
    expect(count('"model":"a","x":{"model":"b"}')).toBe(1);
    expect(() => parse(`{${pad},"a":${"[".repeat(200)}${"]".repeat(200)}}`)).toThrow(/deeper/);
  });

  it("refuses nesting past the bound before parsing, whether in arrays or objects", () => {
    expect(() => parse(`${"[".repeat(10)}${"]".repeat(10)}`, 10)).not.toThrow();
    for (const deep of [
      `${"[".repeat(11)}${"]".repeat(11)}`,
      `${'{"a":'.repeat(11)}1${"}".repeat(11)}`,
    ]) {
      expect(() => parse(deep, 10)).toThrow(ServiceError);
    }
    // Brackets inside strings are no nesting.
    expect(parse(`{"a":"${"[".repeat(500)}"}`, 10).value).toEqual({ a: "[".repeat(500) });
    // Cut-off or invalid JSON is still checked before JSON.parse sees it.
    expect(() => parse("[".repeat(1000), 10)).toThrow(/deeper/);
  });

  it("drops a UTF-8 byte order mark and reports invalid JSON", () => {
    expect(parse("\ufeff{}").raw.toString()).toBe("{}");
    expect(() => parse("{nope")).toThrow(/not valid JSON/);
  });
});
