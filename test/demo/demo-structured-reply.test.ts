import { describe, expect, it } from "vitest";
import { structuredReply } from "../../src/demo/demo-structured-reply.js";

describe("structuredReply", () => {
  it("answers plain text formats with undefined, json_object with {reply}", () => {
    expect(structuredReply(undefined, "r")).toBeUndefined();
    expect(structuredReply({ type: "text" }, "r")).toBeUndefined();
    expect(JSON.parse(structuredReply({ type: "json_object" }, "r") ?? "")).toEqual({ reply: "r" });
  });

  it("fills a schema: chat's nesting and the Responses API's, refs, unions, enums", () => {
    const schema = {
      type: "object",
      properties: {
        name: { type: "string" },
        age: { type: "integer", minimum: 18 },
        kind: { enum: ["cat", "dog"] },
        fixed: { const: 7 },
        maybe: { anyOf: [{ type: "null" }, { type: "number" }] },
        nullable: { type: ["null", "boolean"] },
        friends: { type: "array", items: { $ref: "#/$defs/friend" }, minItems: 2 },
      },
      $defs: { friend: { type: "object", properties: { nick: { type: "string" } } } },
    };
    const expected = {
      name: "r",
      age: 18,
      kind: "cat",
      fixed: 7,
      maybe: 1,
      nullable: true,
      friends: [{ nick: "r" }, { nick: "r" }],
    };
    const chat = { type: "json_schema", json_schema: { name: "x", schema } };
    const responses = { type: "json_schema", name: "x", schema };
    expect(JSON.parse(structuredReply(chat, "r") ?? "")).toEqual(expected);
    expect(JSON.parse(structuredReply(responses, "r") ?? "")).toEqual(expected);
  });

  it("stops at a recursive schema's depth limit", () => {
    const schema = {
      $ref: "#/$defs/node",
      $defs: { node: { type: "object", properties: { child: { $ref: "#/$defs/node" } } } },
    };
    const reply = JSON.parse(structuredReply({ type: "json_schema", schema }, "r") ?? "");
    let depth = 0;
    for (let node = reply; node !== null; node = node.child) depth++;
    expect(depth).toBeGreaterThan(2);
    expect(depth).toBeLessThan(10);
  });
});
