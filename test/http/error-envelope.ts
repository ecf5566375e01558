import { APIError } from "openai";
import { expect } from "vitest";
import { TEST_KEYS, UPSTREAM_KEY } from "../support/start-test-app.js";

/** The OpenAI error envelope's inner object, as clients read it. */
export interface ErrorBody {
  message: string;
  type: string;
  param: string | null;
  code: string | null;
}

/** Anything a client must never see in an error: secrets, stack frames, HTML. */
export function expectNothingLeaked(text: string): void {
  expect(text).not.toContain(UPSTREAM_KEY);
  for (const key of Object.values(TEST_KEYS)) expect(text).not.toContain(key);
  expect(text).not.toMatch(/\n\s+at /);
  expect(text).not.toMatch(/\.ts:\d+|\.js:\d+/);
  expect(text.toLowerCase()).not.toContain("<html");
  expect(text.toLowerCase()).not.toContain("<!doctype");
}

/**
 * Reads a fetch response that must be the service's own error: `status`, a JSON content-type, the
 * exact OpenAI envelope with `code` (and `param` when given), and nothing leaked.
 */
export async function expectError(
  response: Response,
  status: number,
  code: string,
  param?: string | null,
): Promise<ErrorBody> {
  const text = await response.text();
  expect({ status: response.status, text }).toMatchObject({ status });
  expect(response.headers.get("content-type")).toMatch(/^application\/json/);
  const body = JSON.parse(text) as { error: ErrorBody };
  expect(Object.keys(body)).toEqual(["error"]);
  expect(Object.keys(body.error).sort()).toEqual(["code", "message", "param", "type"]);
  expect(body.error.code).toBe(code);
  expect(typeof body.error.message).toBe("string");
  expect(body.error.message.length).toBeGreaterThan(0);
  expect(typeof body.error.type).toBe("string");
  if (param !== undefined) expect(body.error.param).toBe(param);
  expectNothingLeaked(text);
  return body.error;
}

/** Awaits a call of the openai SDK that must fail with an HTTP error, and returns that error. */
export async function sdkError(call: Promise<unknown>): Promise<APIError> {
  try {
    await call;
  } catch (err) {
    if (err instanceof APIError) return err;
    throw err;
  }
  throw new Error("expected the call to fail with an APIError, but it succeeded");
}
