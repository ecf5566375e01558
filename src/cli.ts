#!/usr/bin/env node
// The package bin: `image-task-sidecar serve|mcp|check-config`.
import { runCli } from "./cli/run-cli.js";
import { startServer } from "./server.js";

runCli(process.argv.slice(2), process.env, { startServer }).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  },
);
