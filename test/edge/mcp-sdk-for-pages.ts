/*
 * The MCP SDK's client as a browser app ships it: bundled (by vite, in
 * test/edge/cors-browser.test.ts) into one script a page loads, which puts
 * the two classes a page uses on `globalThis.mcpSdk`.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

Object.assign(globalThis, { mcpSdk: { Client, StreamableHTTPClientTransport } });
