import { URL } from "node:url";
import type { CallObserver, TryObserver } from "../channels/call-observer.js";
import type { Channel } from "../channels/channel.js";
import type { Metrics } from "../metrics/create-metrics.js";
import { NOOP_SPAN, type Span, type Tracer } from "../tracing/tracer.js";

/** What a call's tries are reported into: a request's context, or a task run's report. */
export interface CallReport {
  /** The channel tried last. */
  channel: string | undefined;
  /** What it answered, when it answered. */
  upstreamStatus: number | undefined;
  /** Channels tried so far. */
  tries: number;
}

/** Tokens an answer reported it used. */
export interface TokenCounts {
  input: number;
  output: number;
}

/**
 * Counts `usage` in the GenAI token metric (`gen_ai_client_token_usage`) of
 * `operation` and `modelLabel` (a bounded label: a model a channel lists);
 * a count of 0 is not observed.
 */
export function observeTokenUsage(
  metrics: Metrics,
  operation: string,
  modelLabel: string,
  usage: TokenCounts,
): void {
  const tokens = metrics.genAiTokenUsage;
  if (usage.input > 0) tokens.series(operation, modelLabel, "input").observe(usage.input);
  if (usage.output > 0) tokens.series(operation, modelLabel, "output").observe(usage.output);
}

/** Puts `usage` on `span` as the GenAI conventions name it (`gen_ai.usage.*`). */
export function setUsageAttributes(span: Span, usage: TokenCounts, responseModel?: string): void {
  if (span === NOOP_SPAN) return;
  span.setAttribute("gen_ai.usage.input_tokens", usage.input);
  span.setAttribute("gen_ai.usage.output_tokens", usage.output);
  span.setAttribute("gen_ai.response.model", responseModel);
}

/** Options of {@link createCallObserver}. */
export interface CallObserverOptions {
  report: CallReport;
  /**
   * The GenAI operation (`chat`, `embeddings`, `text_completion`,
   * `image_generation`, ...); undefined for calls that are not one (a read
   * of a stored response): no GenAI metrics then.
   */
  operation: string | undefined;
  /** The model the call asks for, as named (a span attribute). */
  model: string | undefined;
  /** The same, bounded for metric labels: one a channel lists, else `other`. */
  modelLabel: string;
  /**
   * Whether a try's time is the GenAI operation's duration (default true).
   * False for an async job's submission: its operation ends when the job
   * does, and the run reports that duration itself.
   */
  timed?: boolean;
  /** The span the tries' client spans belong to. */
  parent: Span;
  tracer: Tracer;
  metrics: Metrics;
}

/**
 * Hears a call's tries for the access line or the task line (which channel,
 * its status, how many tries), the GenAI client metrics, and, when tracing,
 * a client span per try named `{operation} {model}` with the GenAI semantic
 * conventions, whose `traceparent` the try sends to the channel.
 */
export function createCallObserver(options: CallObserverOptions): CallObserver {
  return { tryStarted: (channel) => new ObservedTry(options, channel) };
}

/** One try: a class, not closures, so a try costs one small object on the passthrough's path. */
class ObservedTry implements TryObserver {
  readonly headers: readonly string[] | undefined;
  private readonly started = performance.now();
  private readonly span: Span;
  private over = false;

  constructor(
    private readonly options: CallObserverOptions,
    channel: Channel,
  ) {
    const { report } = options;
    report.tries += 1;
    report.channel = channel.name;
    report.upstreamStatus = undefined;
    this.span = options.tracer.enabled ? startClientSpan(options, channel) : NOOP_SPAN;
    this.headers = this.span.traceparent ? ["traceparent", this.span.traceparent] : undefined;
  }

  answered(status: number): void {
    this.options.report.upstreamStatus = status;
    if (this.span === NOOP_SPAN) return;
    this.span.setAttribute("http.response.status_code", status);
    if (status >= 400) this.span.setError(`status ${status}`);
  }

  failed(reason: string): void {
    if (this.span === NOOP_SPAN) return;
    this.span.setAttribute("error.type", reason);
    this.span.setError(reason);
  }

  usage(usage: TokenCounts, responseModel?: string): void {
    const { operation, modelLabel, metrics } = this.options;
    if (operation !== undefined) observeTokenUsage(metrics, operation, modelLabel, usage);
    setUsageAttributes(this.span, usage, responseModel);
  }

  ended(): void {
    if (this.over) return;
    this.over = true;
    const { operation, modelLabel, metrics, timed } = this.options;
    if (operation !== undefined && timed !== false) {
      metrics.genAiOperationDuration
        .series(operation, modelLabel)
        .observe((performance.now() - this.started) / 1000);
    }
    if (this.span !== NOOP_SPAN) endSoon(this.span);
  }
}

/*
 * Client spans ended by a try, ended together on the next turn of the event loop: a reader
 * finds the usage in the answer it just read whole and reports it right after the try ends
 * (synchronously), so the span must still take it. One pending immediate for all of them
 * costs less than a closure and an immediate per span.
 */
let ending: Span[] = [];
let endingSpare: Span[] = [];

function endSoon(span: Span): void {
  if (ending.length === 0) setImmediate(endWaiting);
  ending.push(span);
}

function endWaiting(): void {
  const spans = ending;
  ending = endingSpare;
  endingSpare = spans;
  try {
    for (const span of spans) span.end();
  } finally {
    spans.length = 0;
  }
}

/** The last client span name made, by operation and model: a call's are the same as the last. */
let lastName = { operation: undefined as string | undefined, model: "", name: "" };

/** `{operation} {model}`, `call` for no operation; an empty part is left out. */
function spanNameOf(operation: string | undefined, model: string | undefined): string {
  const last = lastName;
  if (last.operation === operation && last.model === (model ?? "") && last.name !== "") {
    return last.name;
  }
  const first = operation ?? "call";
  const name = first && model ? `${first} ${model}` : first || model || "";
  lastName = { operation, model: model ?? "", name };
  return name;
}

function startClientSpan(options: CallObserverOptions, channel: Channel): Span {
  const { operation, model } = options;
  const { host, port } = addressOf(channel);
  return options.tracer.startSpan(spanNameOf(operation, model), {
    kind: "client",
    parent: options.parent,
    attributes: {
      "gen_ai.operation.name": operation,
      "gen_ai.provider.name": "openai",
      "gen_ai.request.model": model,
      "server.address": host,
      "server.port": port,
      "image_task_sidecar.channel": channel.name,
    },
  });
}

/** A channel's host and port, as its client spans name them. */
interface ChannelAddress {
  host: string | undefined;
  port: number | undefined;
}

/** By channel object: parsed once, not on every try (a forward key's copy goes with it). */
const addresses = new WeakMap<Channel, ChannelAddress>();

function addressOf(channel: Channel): ChannelAddress {
  let address = addresses.get(channel);
  if (address) return address;
  address = { host: undefined, port: undefined };
  try {
    const url = new URL(channel.baseUrl);
    address.host = url.hostname;
    address.port = url.port ? Number(url.port) : url.protocol === "https:" ? 443 : 80;
  } catch {
    // A channel's base URL was checked at start-up; nothing to add if it cannot be read.
  }
  addresses.set(channel, address);
  return address;
}
