// nginx as one more pipe: a proxy written in C, passing each request to the fake channel over
// keep-alive upstream connections, without logging. One process (no master, one worker), on
// the cores under test, its files in the run's temp dir. Its CPU time comes from /proc (clock
// ticks: 10 ms, fine over rounds of seconds).
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { startProgram } from "./children.mjs";
import { underTest } from "./cores.mjs";
import { sleep } from "./stats.mjs";

/** True when an `nginx` binary runs here. */
export function nginxAvailable() {
  const out = spawnSync("nginx", ["-v"], { encoding: "utf8" });
  return !out.error && /nginx/.test(`${out.stdout}${out.stderr}`);
}

/** A port free a moment ago (nginx cannot report the one it got for port 0). */
async function freePort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const TICK_US = 10_000; // USER_HZ is 100 on Linux

/** `{ cpu: {user, system} }` in microseconds, from /proc/<pid>/stat, as process.cpuUsage(). */
function procCpu(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { cpu: { user: Number(fields[11]) * TICK_US, system: Number(fields[12]) * TICK_US } };
}

function config(dir, port, channel) {
  return `daemon off;
master_process off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log stderr error;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  keepalive_requests 1000000;
  keepalive_timeout 60s;
  client_max_body_size 20m;
  client_body_buffer_size 1m;
  upstream channel {
    server ${channel.host};
    keepalive 256;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://channel;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Authorization "Bearer upstream";
      proxy_request_buffering off;
      proxy_buffering off;
    }
  }
}
`;
}

/** Starts nginx in front of `channelUrl`; resolves `{ role, url, stats, stop }`. */
export async function startNginxPipe(ctx, channelUrl) {
  const dir = join(ctx.tempDir, `nginx-${Date.now()}`);
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const file = join(dir, "nginx.conf");
  writeFileSync(file, config(dir, port, new URL(channelUrl)));
  const prefix = underTest(ctx.options.pinning);
  const command = [...prefix, "nginx", "-p", dir, "-e", "stderr", "-c", file];
  const { child, exited } = startProgram(command[0], command.slice(1), { group: ctx.group });
  const url = `http://127.0.0.1:${port}`;
  // Ready once it answers (any status).
  for (let i = 0; ; i += 1) {
    if (child.exitCode !== null) throw new Error(`nginx exited: ${child.errors.trim()}`);
    const ok = await fetch(`${url}/v1/models`).then(
      (res) => res.arrayBuffer().then(() => true),
      () => false,
    );
    if (ok) break;
    if (i > 100) throw new Error(`nginx did not answer on ${url}: ${child.errors.trim()}`);
    await sleep(50);
  }
  return {
    role: "nginx",
    url,
    stats: async () => procCpu(child.pid),
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}
