// The floor for any Node proxy: a bare node:http server piping each request to the channel
// and the answer back, over keep-alive connections, with no auth, parsing or metrics.
import { Agent, createServer, request } from "node:http";
import { answerMessages, exitWithParent, statsHandlers } from "./children.mjs";

const target = new URL(process.argv[2]);
const agent = new Agent({ keepAlive: true, maxSockets: 256 });

const server = createServer((req, res) => {
  const upstream = request(
    {
      agent,
      host: target.hostname,
      port: target.port,
      path: req.url,
      method: req.method,
      headers: { ...req.headers, host: target.host, authorization: "Bearer upstream" },
    },
    (answer) => {
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    },
  );
  upstream.on("error", () => res.destroy());
  req.pipe(upstream);
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => {
  exitWithParent(async () => server.closeAllConnections());
  answerMessages(statsHandlers);
  process.send({ url: `http://127.0.0.1:${server.address().port}` });
});
