import type { Registry } from "prom-client";
import { SeriesHistogram } from "./series-histogram.js";
import { METRIC_PREFIX as p } from "./metric-conventions.js";

/** Token counts: the OpenTelemetry GenAI semantic conventions' buckets. */
const TOKEN_BUCKETS = [
  1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
];
/** Seconds: GenAI operations run from a fraction of a second (embeddings) to minutes (images). */
const DURATION_BUCKETS = [
  0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92, 163.84,
  327.68,
];

/**
 * The GenAI client metrics of the OpenTelemetry semantic conventions
 * (`gen_ai.client.operation.duration`, `gen_ai.client.token.usage`), by
 * operation (`chat`, `embeddings`, `image_generation`, ...) and model: one a
 * channel lists, else `other`, so a client cannot make up label values.
 */
export function createGenAiMetrics(registry: Registry) {
  return {
    genAiOperationDuration: new SeriesHistogram({
      name: `${p}gen_ai_client_operation_duration_seconds`,
      help: "Time of a GenAI operation on a channel, from the call to the end of its answer, by operation and model.",
      labelNames: ["operation", "model"] as const,
      buckets: DURATION_BUCKETS,
      registers: [registry],
    }),
    genAiTokenUsage: new SeriesHistogram({
      name: `${p}gen_ai_client_token_usage`,
      help: "Tokens a GenAI operation's answer reported, by operation, model and token type (input, output).",
      labelNames: ["operation", "model", "token_type"] as const,
      buckets: TOKEN_BUCKETS,
      registers: [registry],
    }),
  };
}
