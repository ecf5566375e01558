/*
 * The OTLP/JSON shape of an ExportTraceServiceRequest (the protobuf decoder
 * produces the same shape): ids are hex strings, 64-bit integers decimal
 * strings (or numbers, which JSON senders may also use).
 */

export interface OtlpAnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number | bigint;
  doubleValue?: number | string;
  arrayValue?: { values?: OtlpAnyValue[] };
  kvlistValue?: { values?: OtlpKeyValue[] };
  /** Base64 in JSON; the bytes themselves from protobuf. */
  bytesValue?: string | Uint8Array;
}

export interface OtlpKeyValue {
  key: string;
  value?: OtlpAnyValue;
}

export interface OtlpEvent {
  timeUnixNano?: string | number;
  name?: string;
  attributes?: OtlpKeyValue[];
}

export interface OtlpLink {
  traceId?: string;
  spanId?: string;
  traceState?: string;
  attributes?: OtlpKeyValue[];
}

export interface OtlpSpan {
  traceId?: string;
  spanId?: string;
  traceState?: string;
  parentSpanId?: string;
  name?: string;
  kind?: number | string;
  startTimeUnixNano?: string | number;
  endTimeUnixNano?: string | number;
  attributes?: OtlpKeyValue[];
  events?: OtlpEvent[];
  links?: OtlpLink[];
  status?: { code?: number | string; message?: string };
  flags?: number;
}

export interface OtlpScopeSpans {
  scope?: { name?: string; version?: string; attributes?: OtlpKeyValue[] };
  spans?: OtlpSpan[];
}

export interface OtlpResourceSpans {
  resource?: { attributes?: OtlpKeyValue[] };
  scopeSpans?: OtlpScopeSpans[];
}

export interface OtlpTraceRequest {
  resourceSpans?: OtlpResourceSpans[];
}
