import { createHash } from "node:crypto";
import type { ParsedUrlQuery } from "node:querystring";
import { ServiceError } from "../../errors/service-error.js";
import type { TaskRecord } from "../core/task-record.js";

type Json = Record<string, unknown>;

/** An id for input item `index` of response `id`: the same on every read and replica. */
function itemId(id: string, index: number, prefix: string): string {
  const digest = createHash("sha256").update(`${id}:${index}`).digest("hex");
  return `${prefix}${digest.slice(0, 32)}`;
}

/**
 * A background response's input as OpenAI's input items: a text is one user
 * message; messages take the item shape (text content as `input_text`, or
 * `output_text` for the assistant's); other items as they were sent. Each has
 * an id (its own, or one derived from its place).
 */
function inputItems(record: TaskRecord): Json[] {
  const { input } = record.request;
  if (typeof input === "string") {
    return [
      {
        id: itemId(record.id, 0, "msg_"),
        type: "message",
        role: "user",
        content: [{ type: "input_text", text: input }],
        status: "completed",
      },
    ];
  }
  if (!Array.isArray(input)) return [];
  return input
    .filter((item): item is Json => typeof item === "object" && item !== null)
    .map((item, index) => {
      const isMessage = item.type === "message" || (item.type === undefined && "role" in item);
      if (!isMessage) return { ...item, id: item.id ?? itemId(record.id, index, "item_") };
      const text = item.role === "assistant" ? "output_text" : "input_text";
      const content =
        typeof item.content === "string" ? [{ type: text, text: item.content }] : item.content;
      return {
        id: item.id ?? itemId(record.id, index, "msg_"),
        type: "message",
        role: item.role,
        content,
        status: "completed",
      };
    });
}

/** `GET /v1/responses/{id}/input_items`: OpenAI's cursor list (`limit`, `order`, `after`). */
export function inputItemsPage(record: TaskRecord, query: ParsedUrlQuery): Json {
  const limit = query.limit === undefined ? 20 : Number(query.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) {
    throw new ServiceError("invalid_value", "'limit' must be a whole number from 1 to 100.", {
      param: "limit",
    });
  }
  const order = query.order ?? "desc";
  if (order !== "asc" && order !== "desc") {
    throw new ServiceError("invalid_value", "'order' must be asc or desc.", { param: "order" });
  }
  const all = inputItems(record);
  let items = order === "asc" ? all : all.reverse();
  if (typeof query.after === "string") {
    const at = items.findIndex((item) => item.id === query.after);
    items = at === -1 ? [] : items.slice(at + 1);
  }
  const page = items.slice(0, limit);
  return {
    object: "list",
    data: page,
    first_id: page[0]?.id ?? null,
    last_id: page.at(-1)?.id ?? null,
    has_more: items.length > limit,
  };
}
