// The fake channel: an OpenAI-compatible upstream in its own process, as cheap as it can be
// (answers are built once). Routes:
//   POST /v1/chat/completions   ~1 KB JSON answer; with "stream": true, STREAM_CHUNKS SSE
//                               events STREAM_GAP_MS apart, one write each
//   POST /v1/responses          ~1 KB Responses API answer, each with an id of its own (a
//                               service remembers each response's owner, as with a real channel)
//   POST /v1/images/edits       drains the form, answers one tiny b64 PNG
//   POST /v1/images/generations one tiny b64 PNG at once; for a model whose name holds
//                               "slow", nothing until the client goes (tasks that never end).
//                               With the option `realImages`, both answer a real-size image
//                               instead: a 1024x1024 PNG of random pixels (incompressible,
//                               about 3 MB; 4 MB as base64), as gpt-image models answer.
//   GET  /v1/models
// Answers IPC `stats` with its CPU time (it is the middle process of the "direct" target).
import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import { crc32, deflateSync } from "node:zlib";
import { answerMessages, exitWithParent } from "./children.mjs";
import { TINY_PNG_BASE64 } from "./payloads.mjs";

const {
  streamChunks = 20,
  streamGapMs = 20,
  realImages = false,
} = JSON.parse(process.argv[2] ?? "{}");

/** A PNG of `size` x `size` random RGB pixels: stored deflate blocks, since noise does not compress. */
function noisePng(size) {
  const chunk = (type, data) => {
    const head = Buffer.alloc(8);
    head.writeUInt32BE(data.length, 0);
    head.write(type, 4, "latin1");
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
    return Buffer.concat([head, data, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(size, 0);
  header.writeUInt32BE(size, 4);
  header[8] = 8; // bit depth
  header[9] = 2; // RGB
  const rows = randomBytes((size * 3 + 1) * size);
  for (let y = 0; y < size; y += 1) rows[y * (size * 3 + 1)] = 0; // filter: none
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", header),
    chunk("IDAT", deflateSync(rows, { level: 0 })),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}

const json = (value) => {
  const text = Buffer.from(JSON.stringify(value));
  return { text, length: String(text.length) };
};
const filler = "The quick brown fox jumps over the lazy dog. ".repeat(17).slice(0, 760);
const chat = json({
  id: "chatcmpl-bench",
  object: "chat.completion",
  created: 1700000000,
  model: "gpt-4o-mini",
  choices: [{ index: 0, message: { role: "assistant", content: filler }, finish_reason: "stop" }],
  usage: { prompt_tokens: 9, completion_tokens: 160, total_tokens: 169 },
});
const RESPONSE_ID = "resp_bench_000000000000";
const responses = json({
  id: RESPONSE_ID,
  object: "response",
  created_at: 1700000000,
  status: "completed",
  model: "gpt-4o-mini",
  output: [
    {
      type: "message",
      id: "msg_bench",
      status: "completed",
      role: "assistant",
      content: [{ type: "output_text", text: filler, annotations: [] }],
    },
  ],
  usage: { input_tokens: 9, output_tokens: 160, total_tokens: 169 },
});
const image = json({
  created: 1700000000,
  data: [{ b64_json: realImages ? noisePng(1024).toString("base64") : TINY_PNG_BASE64 }],
});
const models = json({
  object: "list",
  data: ["gpt-4o-mini", "gpt-image-1", "gpt-image-slow"].map((id) => ({
    id,
    object: "model",
    created: 0,
    owned_by: "bench",
  })),
});
const chunk = (index) =>
  `data: ${JSON.stringify({
    id: "chatcmpl-bench",
    object: "chat.completion.chunk",
    created: 1700000000,
    model: "gpt-4o-mini",
    choices: [{ index: 0, delta: { content: `part ${index} ` }, finish_reason: null }],
  })}\n\n`;

const responseIdAt = responses.text.indexOf(RESPONSE_ID) + "resp_bench_".length;
let responsesMade = 0;

/** The Responses answer with the next id: a copy, since a write may still hold the last one. */
function nextResponse() {
  const text = Buffer.from(responses.text);
  text.write(String(++responsesMade).padStart(12, "0"), responseIdAt, "latin1");
  return { text, length: responses.length };
}

const send = (res, { text, length }) => {
  res.writeHead(200, { "content-type": "application/json", "content-length": length });
  res.end(text);
};

function stream(res) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  // One write per event: the first at once, then one every streamGapMs, the last with [DONE].
  res.write(chunk(0));
  let sent = 1;
  const timer = setInterval(() => {
    if (sent < streamChunks - 1) {
      res.write(chunk(sent));
      sent += 1;
      return;
    }
    clearInterval(timer);
    res.end(`${chunk(sent)}data: [DONE]\n\n`);
  }, streamGapMs);
  res.on("close", () => clearInterval(timer));
}

const server = createServer((req, res) => {
  const path = req.url.split("?")[0];
  if (req.method === "GET") {
    if (path === "/v1/models") send(res, models);
    else res.writeHead(404).end();
    return;
  }
  // Only small JSON bodies are looked into (stream flag, slow model); forms are drained.
  const look = path === "/v1/chat/completions" || path === "/v1/images/generations";
  let body = "";
  req.on("data", (data) => {
    if (look && body.length < 4096) body += data;
  });
  req.on("end", () => {
    if (path === "/v1/chat/completions") {
      if (/"stream"\s*:\s*true/.test(body)) stream(res);
      else send(res, chat);
    } else if (path === "/v1/responses") send(res, nextResponse());
    else if (path === "/v1/images/edits") send(res, image);
    else if (path === "/v1/images/generations") {
      if (!/"model"\s*:\s*"[^"]*slow/.test(body)) send(res, image);
      // A slow model: held until the service aborts the call or goes away.
    } else res.writeHead(404).end();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => {
  exitWithParent(async () => server.closeAllConnections());
  answerMessages({ stats: () => ({ cpu: process.cpuUsage(), memory: process.memoryUsage() }) });
  process.send({ url: `http://127.0.0.1:${server.address().port}` });
});
