import { ERROR_CODES, type ErrorCode } from "./error-codes.js";

/** Options of an {@link AppError} beyond its code and message. */
export interface AppErrorOptions {
  /** The request field at fault, reported as `error.param`. */
  param?: string | null;
  /** Extra response headers, e.g. `Retry-After` for `queue_full`. */
  headers?: Record<string, string>;
  /**
   * The service itself is shedding load: the code's `sheddingStatus` (503)
   * instead of its usual status. Only codes that have one take it.
   */
  shedding?: boolean;
  cause?: unknown;
}

/**
 * The one error type handlers throw. Status and OpenAI `type` come from the
 * {@link ERROR_CODES} table so a code can never be sent with the wrong status.
 */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly type: string;
  readonly param: string | null;
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message: string, options: AppErrorOptions = {}) {
    super(message, { cause: options.cause });
    this.name = "AppError";
    this.code = code;
    const entry: { status: number; sheddingStatus?: number } = ERROR_CODES[code];
    this.status = (options.shedding ? entry.sheddingStatus : undefined) ?? entry.status;
    this.type = ERROR_CODES[code].type;
    this.param = options.param ?? null;
    this.headers = options.headers ?? {};
  }

  /** The OpenAI error envelope clients see. */
  toJSON(): OpenAIErrorBody {
    return {
      error: { message: this.message, type: this.type, param: this.param, code: this.code },
    };
  }
}

/** The OpenAI error envelope. */
export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}
