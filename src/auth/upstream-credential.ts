import { inspect } from "node:util";

const REDACTED = "[redacted]";

/**
 * A client's own key, held to be sent upstream (forward mode). The value sits
 * in a private field: serialising or inspecting the object (a logged
 * principal, an error's context, `JSON.stringify`) shows `[redacted]`, so the
 * key reaches the wire only through an explicit {@link reveal}.
 */
export class UpstreamCredential {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  /** The key itself, for the one header that must carry it. */
  reveal(): string {
    return this.#value;
  }

  toJSON(): string {
    return REDACTED;
  }

  toString(): string {
    return REDACTED;
  }

  [inspect.custom](): string {
    return REDACTED;
  }
}
