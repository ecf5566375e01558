import type { TracingOptions } from "./tracing-options.js";

/**
 * Whether a span is sampled: given its trace id and its parent's sampled
 * flag (undefined for a root span, one without a valid parent).
 */
export type SampleDecision = (traceId: string, parentSampled: boolean | undefined) => boolean;

/**
 * The sampler `OTEL_TRACES_SAMPLER` names, deciding as OpenTelemetry's SDK
 * samplers do. Every parent the service sees is a `traceparent` (from a
 * task kept in a store, or a trusted caller), which the SDK treats as a
 * remote parent: the parent-based samplers follow its sampled flag.
 */
export function createSampler(sampler: TracingOptions["sampler"]): SampleDecision {
  switch (sampler.name) {
    case "always_on":
      return () => true;
    case "always_off":
      return () => false;
    case "traceidratio":
      return ratioSampler(sampler.ratio);
    case "parentbased_always_off":
      return (_traceId, parentSampled) => parentSampled === true;
    case "parentbased_traceidratio": {
      const root = ratioSampler(sampler.ratio);
      return (traceId, parentSampled) => parentSampled ?? root(traceId, undefined);
    }
    default:
      return (_traceId, parentSampled) => parentSampled ?? true;
  }
}

/**
 * OpenTelemetry's TraceIdRatioBased: the trace id's four 32-bit words XORed,
 * below `ratio` of 2^32 - 1. Every replica that sees a trace id decides the same.
 */
function ratioSampler(ratio: number): SampleDecision {
  const normal = Number.isNaN(ratio) ? 0 : Math.min(1, Math.max(0, ratio));
  const upperBound = normal === 1 ? 0x1_0000_0000 : Math.floor(normal * 0xffffffff);
  return (traceId) => accumulate(traceId) < upperBound;
}

function accumulate(traceId: string): number {
  let accumulation = 0;
  for (let i = 0; i < 32; i += 8) {
    let part = 0;
    for (let j = 0; j < 8; j++) {
      const c = traceId.charCodeAt(i + j);
      part = (part << 4) | (c < 58 ? c - 48 : c < 71 ? c - 55 : c - 87);
    }
    accumulation = (accumulation ^ part) >>> 0;
  }
  return accumulation;
}
