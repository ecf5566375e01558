/** A JSON-RPC error answer with no request id, as MCP clients expect one outside a call. */
export function jsonRpcError(code: number, message: string) {
  return { jsonrpc: "2.0", error: { code, message }, id: null };
}
