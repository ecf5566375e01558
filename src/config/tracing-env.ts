import type { TracingOptions } from "../tracing/tracing-options.js";

const SAMPLERS: ReadonlyArray<TracingOptions["sampler"]["name"]> = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio",
];

/** `k1=v1,k2=v2` with URL-encoded values, as OTEL_EXPORTER_OTLP_HEADERS and _RESOURCE_ATTRIBUTES are. */
function pairs(text: string | undefined, name: string, problems: string[]): Record<string, string> {
  const found: Record<string, string> = {};
  for (const item of (text ?? "").split(",")) {
    if (item.trim() === "") continue;
    const equals = item.indexOf("=");
    if (equals <= 0) {
      problems.push(`${name}: must be key=value pairs separated by commas`);
      continue;
    }
    try {
      found[item.slice(0, equals).trim()] = decodeURIComponent(item.slice(equals + 1).trim());
    } catch {
      problems.push(`${name}: a value is not URL-encoded properly`);
    }
  }
  return found;
}

/**
 * Tracing as the standard OpenTelemetry variables ask for it: off (undefined)
 * unless `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as it is) or
 * `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/traces` added) is set, or when
 * `OTEL_SDK_DISABLED=true`. Problems name the variable.
 */
export function tracingFromEnv(
  env: NodeJS.ProcessEnv,
  problems: string[],
): TracingOptions | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return undefined;
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!traces && !base) return undefined;
  const endpoint = traces || `${base!.replace(/\/+$/, "")}/v1/traces`;
  const variable = traces ? "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" : "OTEL_EXPORTER_OTLP_ENDPOINT";
  if (!/^https?:\/\/[^\s/]+/i.test(endpoint)) problems.push(`${variable}: must be an http(s) URL`);
  const protocolVariable = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
    ? "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
    : "OTEL_EXPORTER_OTLP_PROTOCOL";
  const protocol = (env[protocolVariable]?.trim() || "http/protobuf") as TracingOptions["protocol"];
  if (protocol !== "http/protobuf" && protocol !== "http/json") {
    problems.push(
      `${protocolVariable}: must be http/protobuf or http/json (grpc is not supported)`,
    );
  }
  const samplerName = (env.OTEL_TRACES_SAMPLER?.trim() ||
    "parentbased_always_on") as TracingOptions["sampler"]["name"];
  if (!SAMPLERS.includes(samplerName)) {
    problems.push(`OTEL_TRACES_SAMPLER: must be one of ${SAMPLERS.join(", ")}`);
  }
  const batch = batchFromEnv(env, problems);
  const ratioText = env.OTEL_TRACES_SAMPLER_ARG?.trim();
  const ratio = ratioText ? Number(ratioText) : 1;
  if (!(ratio >= 0 && ratio <= 1)) problems.push("OTEL_TRACES_SAMPLER_ARG: must be from 0 to 1");
  return {
    endpoint,
    protocol,
    headers: {
      ...pairs(env.OTEL_EXPORTER_OTLP_HEADERS, "OTEL_EXPORTER_OTLP_HEADERS", problems),
      ...pairs(
        env.OTEL_EXPORTER_OTLP_TRACES_HEADERS,
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        problems,
      ),
    },
    serviceName: env.OTEL_SERVICE_NAME?.trim() || "image-task-sidecar",
    resourceAttributes: pairs(env.OTEL_RESOURCE_ATTRIBUTES, "OTEL_RESOURCE_ATTRIBUTES", problems),
    sampler: { name: samplerName, ratio },
    ...(batch ? { batch } : {}),
  };
}

/** `OTEL_BSP_*` and the export timeout, where set: whole numbers, batches no larger than the queue. */
function batchFromEnv(
  env: NodeJS.ProcessEnv,
  problems: string[],
): TracingOptions["batch"] | undefined {
  const batch: NonNullable<TracingOptions["batch"]> = {};
  const read = (name: string, key: keyof typeof batch, min: number) => {
    const text = env[name]?.trim();
    if (!text) return;
    const value = Number(text);
    if (Number.isInteger(value) && value >= min) batch[key] = value;
    else problems.push(`${name}: must be a whole number from ${min}`);
  };
  read("OTEL_BSP_MAX_QUEUE_SIZE", "maxQueueSize", 1);
  read("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "maxBatchSize", 1);
  read("OTEL_BSP_SCHEDULE_DELAY", "delayMs", 0);
  read("OTEL_EXPORTER_OTLP_TIMEOUT", "timeoutMs", 1);
  read("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "timeoutMs", 1);
  if ((batch.maxBatchSize ?? 512) > (batch.maxQueueSize ?? 2048)) {
    problems.push("OTEL_BSP_MAX_EXPORT_BATCH_SIZE: must not exceed OTEL_BSP_MAX_QUEUE_SIZE");
  }
  return Object.keys(batch).length > 0 ? batch : undefined;
}
