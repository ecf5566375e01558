import { describe, expect, it } from "vitest";
import { FormScanner, formBoundary } from "../../src/proxy/form/form-scanner.js";

const B = "XyZ";
const part = (name: string, value: string, extra = "") =>
  `--${B}\r\nContent-Disposition: form-data; name="${name}"${extra}\r\n\r\n${value}\r\n`;
const end = `--${B}--\r\n`;

/** Scans `text` cut into pieces of `size` bytes. */
function scan(text: string, size = text.length): FormScanner {
  const scanner = new FormScanner(B);
  const bytes = Buffer.from(text);
  for (let at = 0; at < bytes.length; at += size) scanner.push(bytes.subarray(at, at + size));
  scanner.end();
  return scanner;
}

describe("FormScanner", () => {
  it("finds the model field wherever the chunks are cut", () => {
    const text =
      part("file", "bytes\r\n--XyZnot-a-delimiter-but-refused".slice(0, 5), '; filename="a.png"') +
      part("model", "gpt-image-1") +
      end;
    for (let size = 1; size <= text.length; size += 1)
      expect(scan(text, size).model).toBe("gpt-image-1");
  });

  it("refuses what parsers could split or name differently", () => {
    const bad = [
      `preamble\r\n${part("model", "m")}${end}`,
      `${part("file", `x\r\n--${B}X`)}${end}`,
      `${part("model", "m")}${end}trailing data`,
      `${part("model", "a")}${part("model", "b")}${end}`,
      `${part("Model", "a")}${end}`,
      `--${B}\r\nContent-Disposition: form-data; name="model"\r\n  folded\r\n\r\nm\r\n${end}`,
      `${part("model", "m".repeat(2000))}${end}`,
      `${part("file", "x")}`,
      // A part without a field name, or with an empty one: the task routes refuse both.
      `--${B}\r\nContent-Disposition: form-data\r\n\r\nx\r\n${part("model", "m")}${end}`,
      `${part("", "x")}${part("model", "m")}${end}`,
    ];
    for (const text of bad) expect(() => scan(text), text.slice(0, 60)).toThrow();
  });

  it("reads the n field (an image stream's count) only once the form is whole, and only one", () => {
    const text = part("n", "2") + part("model", "gpt-image-1") + end;
    for (let size = 1; size <= text.length; size += 1) expect(scan(text, size).nField()).toBe("2");
    expect(scan(part("model", "m") + end).nField()).toBeUndefined();
    expect(scan(part("n", "1") + part("n", "2") + part("model", "m") + end).nField()).toBeNull();
    expect(scan(part("n", "1".repeat(17)) + part("model", "m") + end).nField()).toBeNull();
    // A file part called n is no count.
    expect(scan(part("n", "2", '; filename="n"') + end).nField()).toBeUndefined();
    const open = new FormScanner(B);
    open.push(Buffer.from(part("n", "2") + part("model", "m")));
    expect(open.nField()).toBeNull();
  });

  it("reads the boundary strictly", () => {
    expect(formBoundary(`multipart/form-data; boundary=${B}`)).toBe(B);
    expect(formBoundary('multipart/form-data; boundary="a b"')).toBe("a b");
    for (const type of [
      "application/json",
      "multipart/form-data",
      "multipart/form-data; boundary=a; boundary=b",
      `multipart/form-data; boundary=${"x".repeat(71)}`,
    ]) {
      expect(() => formBoundary(type), type).toThrow();
    }
  });
});
