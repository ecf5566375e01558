// An OTLP/HTTP endpoint for the traced variant: takes every export and answers 200, in the
// bench's own process (its CPU is not the service's).
import { createServer } from "node:http";

export async function startTraceSink(ctx) {
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end("{}"));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  server.unref();
  // The phase's signal ends with the phase.
  ctx.signal.addEventListener("abort", () => {
    server.close();
    server.closeAllConnections();
  });
  return { url: `http://127.0.0.1:${server.address().port}` };
}
