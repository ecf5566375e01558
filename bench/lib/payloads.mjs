// Request and answer bodies shared by the phases and the fake channel.

/** A 1x1 PNG, as a channel's `b64_json`. */
export const TINY_PNG_BASE64 =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

export const CHAT_BODY = JSON.stringify({
  model: "gpt-4o-mini",
  messages: [{ role: "user", content: "Say something about foxes." }],
});

export const STREAM_BODY = JSON.stringify({
  model: "gpt-4o-mini",
  stream: true,
  messages: [{ role: "user", content: "Say something about foxes, slowly." }],
});

export const RESPONSES_BODY = JSON.stringify({
  model: "gpt-4o-mini",
  input: "Say something about foxes.",
});

export const taskBody = (model = "gpt-image-1", responseFormat = "b64_json") =>
  JSON.stringify({
    model,
    prompt: "a fox in the snow",
    size: "1024x1024",
    response_format: responseFormat,
  });

/**
 * A multipart `/v1/images/edits` form of about `kib` KiB: a PNG-looking image file (PNG
 * signature, then filler bytes) and the text fields.
 */
export function editForm(kib = 300) {
  const boundary = "----bench-boundary-7f3a9c";
  const png = Buffer.concat([
    Buffer.from(TINY_PNG_BASE64, "base64"),
    Buffer.alloc(kib * 1024, 0x5a),
  ]);
  const field = (name, value) =>
    `--${boundary}\r\ncontent-disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
  const body = Buffer.concat([
    Buffer.from(field("model", "gpt-image-1") + field("prompt", "add a hat to the fox")),
    Buffer.from(
      `--${boundary}\r\ncontent-disposition: form-data; name="image"; filename="fox.png"\r\ncontent-type: image/png\r\n\r\n`,
    ),
    png,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return { body, contentType: `multipart/form-data; boundary=${boundary}` };
}

/**
 * {@link editForm} as a load's request, with `headers` (the key) beside its Content-Type; `kib`
 * is the form's size as sent.
 */
export function editRequest(kib, headers) {
  const form = editForm(kib);
  return {
    path: "/v1/images/edits",
    method: "POST",
    headers: { ...headers, "content-type": form.contentType },
    bodyBase64: form.body.toString("base64"),
    kib: Math.round(form.body.length / 1024),
  };
}
