// An S3-compatible store for the bench's image-store runs: s3rver (from npm) in a process of
// its own, path-style, bucket "bench", its objects in a temp directory deleted on exit.
// Sends {url, bucket, accessKeyId, secretAccessKey}; answers IPC `stats` (CPU and memory).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import S3rver from "s3rver";
import { answerMessages, exitWithParent } from "./children.mjs";

const directory = mkdtempSync(join(tmpdir(), "bench-s3-"));
const server = new S3rver({
  port: 0,
  address: "127.0.0.1",
  silent: true,
  directory,
  configureBuckets: [{ name: "bench" }],
});
const { port } = await server.run();
const clean = () => rmSync(directory, { recursive: true, force: true });
process.on("exit", clean);
exitWithParent(async () => {
  await server.close();
  clean();
});
answerMessages({ stats: () => ({ cpu: process.cpuUsage(), memory: process.memoryUsage() }) });
process.send({
  url: `http://127.0.0.1:${port}`,
  bucket: "bench",
  accessKeyId: "S3RVER",
  secretAccessKey: "S3RVER",
});
