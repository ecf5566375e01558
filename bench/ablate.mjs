// A copy of the built service with some of the passthrough's contract parts taken out, to
// measure what each costs as BASELINE beside the real build (docs/performance.md, "An
// eighteenth pass"). A measurement, never a product: an ablated build breaks the contract (it
// passes a broken answer on as a 200, logs nothing, counts nothing, leaks a channel's key).
//
//   node bench/ablate.mjs PART... --out DIR [--dist dist]
//        DIR/dist (the ablated copy), DIR/node_modules (a link to this checkout's) and
//        DIR/package.json; then: BASELINE=DIR/dist BENCH_LOADS=chat-c64 npm run bench -- proxy
//
// Parts: json (the answer checked as JSON, and the token usage read from it), access (the access
// line and the HTTP request metrics), scrub (the answer and its headers scrubbed of the channel's
// key), scan (the request body's scan and its `model`: every chat goes to gpt-4o-mini, the
// bench's model), request-id (a constant id instead of a new one), all (every one of them).
// Each part is a text edit of the compiled JavaScript; one whose text is not found exactly once
// stops the script, so a change to the code that moves it is seen, not measured as nothing.
import {
  cpSync,
  existsSync,
  mkdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";

const ROOT = resolve(dirname(new URL(import.meta.url).pathname), "..");

/** Each part's edits: file under dist/, the exact text, what replaces it. */
const PARTS = {
  json: [
    [
      "proxy/deliver-answer.js",
      'parsed = JSON.parse(body.toString("utf8"));',
      "parsed = undefined;",
    ],
  ],
  access: [
    [
      "observability/observe-requests.js",
      "    deps.metrics.httpRequestSeries.get(route, method, status).inc();\n" +
        "    deps.metrics.httpDuration.series(route, method, status).observe(seconds);\n",
      "",
    ],
    [
      "observability/observe-requests.js",
      "logAccess(deps, req, res, context, route, seconds, probe, aborted);",
      ";",
    ],
  ],
  scrub: [
    ["proxy/deliver-answer.js", "const out = scrubber.scrub(body);", "const out = body;"],
    [
      "proxy/deliver-answer.js",
      "copyResponseHeaders(answer.headers, (name, value) => res.setHeader(name, value), scrubber.scrubText);",
      "copyResponseHeaders(answer.headers, (name, value) => res.setHeader(name, value), (v) => v);",
    ],
  ],
  scan: [
    [
      "proxy/prepare-request.js",
      "        const raw = withoutBom(bytes);\n",
      "        const raw = withoutBom(bytes);\n" +
        '        if (!request.route.createsResponse) { setModel(request, "gpt-4o-mini", raw); return requireCandidates(request); }\n',
    ],
  ],
  "request-id": [
    [
      "observability/request-id.js",
      'return typeof header === "string" && SANE.test(header) ? header : newRequestId();',
      'return "req-ablated";',
    ],
  ],
};

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { out: { type: "string" }, dist: { type: "string", default: join(ROOT, "dist") } },
});
const parts = positionals.includes("all") ? Object.keys(PARTS) : positionals;
const unknown = parts.filter((part) => !(part in PARTS));
if (!values.out || parts.length === 0 || unknown.length > 0) {
  console.error(
    `usage: node bench/ablate.mjs PART... --out DIR [--dist dist]; parts: ${Object.keys(PARTS).join(", ")}, all` +
      (unknown.length > 0 ? `\nunknown: ${unknown.join(", ")}` : ""),
  );
  process.exit(2);
}
const source = resolve(values.dist);
if (!existsSync(join(source, "main.js"))) {
  console.error(`no build at ${source}: run npm run build first`);
  process.exit(2);
}

const out = resolve(values.out);
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
cpSync(source, join(out, "dist"), { recursive: true });
cpSync(join(ROOT, "package.json"), join(out, "package.json"));
symlinkSync(join(ROOT, "node_modules"), join(out, "node_modules"), "dir");

for (const part of parts) {
  for (const [file, text, replacement] of PARTS[part]) {
    const path = join(out, "dist", file);
    const code = readFileSync(path, "utf8");
    const found = code.split(text).length - 1;
    if (found !== 1) {
      console.error(
        `${part}: ${file} has its text ${found} times, not once: update bench/ablate.mjs`,
      );
      rmSync(out, { recursive: true, force: true });
      process.exit(1);
    }
    writeFileSync(path, code.replace(text, replacement));
  }
}
console.log(`${join(out, "dist")}: the build without ${parts.join(", ")}`);
