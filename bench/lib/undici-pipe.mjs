// The same floor as bare-pipe.mjs with undici as the client: a bare node:http server passing
// each request to the channel through an undici Pool (dispatch, the API the service's channel
// client uses) and the answer back, over keep-alive connections, with no auth, parsing or
// metrics. Beside the node:http pipe it shows what the HTTP client alone costs.
import { createServer } from "node:http";
import { Pool } from "undici";
import { answerMessages, exitWithParent, statsHandlers } from "./children.mjs";

const target = new URL(process.argv[2]);
const pool = new Pool(target.origin, { headersTimeout: 0, bodyTimeout: 0 });

const server = createServer((req, res) => {
  const headers = { ...req.headers, authorization: "Bearer upstream" };
  delete headers.host;
  delete headers.connection;
  delete headers["keep-alive"];
  pool.dispatch(
    { path: req.url, method: req.method, headers, body: req },
    {
      onRequestStart() {},
      onResponseStart(controller, status, answerHeaders) {
        res.writeHead(status, answerHeaders);
      },
      onResponseData(controller, chunk) {
        if (!res.write(chunk)) {
          controller.pause();
          res.once("drain", () => controller.resume());
        }
      },
      onResponseEnd() {
        res.end();
      },
      onResponseError() {
        res.destroy();
      },
    },
  );
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => {
  exitWithParent(async () => server.closeAllConnections());
  answerMessages(statsHandlers);
  process.send({ url: `http://127.0.0.1:${server.address().port}` });
});
