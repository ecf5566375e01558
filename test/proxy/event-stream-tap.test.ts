import { describe, expect, it } from "vitest";
import { EventStreamTap } from "../../src/proxy/event-stream-tap.js";

/** Feeds `text` to a tap in pieces of `size` bytes; whether it saw the stream's last event. */
function finishedAfter(text: string, size: number, images?: number): boolean {
  const tap = new EventStreamTap(undefined, images);
  const bytes = Buffer.from(text);
  for (let at = 0; at < bytes.length; at += size) tap.push(bytes.subarray(at, at + size));
  return tap.finished;
}

const image = "A".repeat(2000);
const event = (data: Record<string, unknown>, name?: string) =>
  `${name ? `event: ${name}\n` : ""}data: ${JSON.stringify(data)}\n\n`;
const partial = event({ type: "image_generation.partial_image", b64_json: image });
const usage = { input_tokens: 1, output_tokens: 1, total_tokens: 2 };

describe("EventStreamTap, on an image stream", () => {
  const completions = [
    ["with usage (parsed)", event({ type: "image_generation.completed", b64_json: image, usage })],
    ["its type first", event({ type: "image_edit.completed", b64_json: image })],
    ["its type after the image", event({ b64_json: image, type: "image_generation.completed" })],
    ["named by its event line", event({ b64_json: image }, "image_edit.completed")],
  ];

  it.each(completions)(
    "is finished at the n-th final image %s, wherever the pieces are cut",
    (_, completed) => {
      const two = partial + completed + partial + completed;
      for (const size of [1, 7, 64, 511, 512, 513, 4096, two.length]) {
        expect(finishedAfter(partial + completed, size, 1), `size ${size}`).toBe(true);
        expect(finishedAfter(partial + completed, size, 2), `size ${size}`).toBe(false);
        expect(finishedAfter(two, size, 2), `size ${size}`).toBe(true);
      }
    },
  );

  it("is not finished by partial images, by other streams' events, or when n is not known", () => {
    const lookalikes =
      partial +
      event({ type: "response.image_generation_call.completed", b64_json: image }) +
      event({ type: "image_generation.partial_image", revised_prompt: 'type: "x.completed"' });
    expect(finishedAfter(lookalikes, 100, 1)).toBe(false);
    const completed = event({ type: "image_generation.completed", b64_json: image, usage });
    expect(finishedAfter(completed, 100, undefined)).toBe(false);
  });

  it("tells a final image too large to be read whole by its head or its end", () => {
    const large = "A".repeat(4.5 * 1024 * 1024);
    for (const completed of [
      event({ type: "image_generation.completed", b64_json: large }),
      event({ b64_json: large, type: "image_generation.completed", usage }),
      event({ b64_json: large }, "image_generation.completed"),
    ]) {
      expect(finishedAfter(completed, 65536, 1)).toBe(true);
      expect(finishedAfter(completed, completed.length, 1)).toBe(true);
      expect(finishedAfter(event({ b64_json: large }), 65536, 1)).toBe(false);
    }
  });
});
