import type { ListOrder, Task, TaskDeleted, TaskPage, TaskStatus } from "./task-types.js";

/** A refusal of the API (its error envelope), or the service out of reach (`status` 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly param?: string,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

/** What the console asks the API; every call carries the user's key as a bearer header. */
export interface Api {
  /** The ids of the key's models, sorted as the API sorts them. */
  models(signal?: AbortSignal): Promise<string[]>;
  /** `POST /v1/images/tasks` with a JSON body. */
  submit(body: Record<string, unknown>): Promise<Task>;
  /** `POST /v1/images/edits/tasks` with a multipart body. */
  submitEdit(form: FormData): Promise<Task>;
  list(query: ListQuery, signal?: AbortSignal): Promise<TaskPage>;
  /**
   * `GET /v1/images/tasks/{id}`; `links: "service"`: with the service's own
   * image links, whatever `images.links` says (presigned or CDN links are on
   * another origin, which the page may show but not fetch).
   */
  get(id: string, signal?: AbortSignal, links?: "service"): Promise<Task>;
  cancel(id: string): Promise<Task>;
  /** `DELETE /v1/images/tasks/{id}`: the task and its images, at once (a running one is cancelled). */
  remove(id: string): Promise<TaskDeleted>;
  /** The task's event stream, resuming after `lastEventId`; the body is read by the caller. */
  events(id: string, lastEventId: string | undefined, signal?: AbortSignal): Promise<Response>;
}

export interface ListQuery {
  limit: number;
  after?: string;
  status?: TaskStatus;
  /** `asc`: oldest first (the API's default, `desc`, is newest first). */
  order?: ListOrder;
}

export interface ApiOptions {
  /** The API's base, ending in `/v1/`. */
  base: string;
  key: string;
  fetch?: typeof fetch;
}

/**
 * The API client. Requests carry no cookie and no referrer; the key goes in
 * the `Authorization` header only, never in a URL.
 */
export function createApi(options: ApiOptions): Api {
  const send = options.fetch ?? ((input, init) => fetch(input, init));
  const call = async (path: string, init: RequestInit = {}): Promise<Response> => {
    let response: Response;
    try {
      response = await send(new URL(path, options.base), {
        ...init,
        credentials: "omit",
        referrerPolicy: "no-referrer",
        headers: { Authorization: `Bearer ${options.key}`, ...init.headers },
      });
    } catch (err) {
      if (isAbort(err)) throw err;
      throw new ApiError(0, "network_error", "The service could not be reached.");
    }
    if (!response.ok) throw await errorOf(response);
    return response;
  };
  const json = async <T>(path: string, init?: RequestInit): Promise<T> =>
    (await (await call(path, init)).json()) as T;
  const task = (id: string) => `images/tasks/${encodeURIComponent(id)}`;

  return {
    async models(signal) {
      const list = await json<{ data: Array<{ id: string }> }>("models", { signal });
      return list.data.map((model) => model.id);
    },
    submit: (body) =>
      json<Task>("images/tasks", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
      }),
    submitEdit: (form) => json<Task>("images/edits/tasks", { method: "POST", body: form }),
    list(query, signal) {
      const params = new URLSearchParams({ limit: String(query.limit) });
      if (query.after) params.set("after", query.after);
      if (query.status) params.set("status", query.status);
      if (query.order) params.set("order", query.order);
      return json<TaskPage>(`images/tasks?${params}`, { signal });
    },
    get: (id, signal, links) =>
      json<Task>(links ? `${task(id)}?links=${links}` : task(id), { signal }),
    cancel: (id) => json<Task>(`${task(id)}/cancel`, { method: "POST" }),
    remove: (id) => json<TaskDeleted>(task(id), { method: "DELETE" }),
    events: (id, lastEventId, signal) =>
      call(`${task(id)}/events`, {
        signal,
        headers: {
          Accept: "text/event-stream",
          ...(lastEventId === undefined ? {} : { "Last-Event-ID": lastEventId }),
        },
      }),
  };
}

/** The API's error envelope as an {@link ApiError}; anything else by its status. */
async function errorOf(response: Response): Promise<ApiError> {
  const text = await response.text().catch(() => "");
  try {
    const { error } = JSON.parse(text) as {
      error?: { message?: unknown; code?: unknown; param?: unknown };
    };
    if (error && typeof error.message === "string") {
      return new ApiError(
        response.status,
        typeof error.code === "string" ? error.code : "error",
        error.message,
        typeof error.param === "string" ? error.param : undefined,
      );
    }
  } catch {
    // not the envelope: a proxy's page, say
  }
  return new ApiError(
    response.status,
    "http_error",
    `The service answered ${response.status} ${response.statusText}`.trim() + ".",
  );
}

/** Whether `err` is a fetch or a wait given up through an `AbortSignal`. */
export function isAbort(err: unknown): boolean {
  return (err as { name?: unknown } | null)?.name === "AbortError";
}
