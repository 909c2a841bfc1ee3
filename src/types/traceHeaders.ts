// The W3C trace context as HTTP carries it: a handler is given its batch's, an append may continue one.

/** A W3C trace context as HTTP carries it: `traceparent`, and `tracestate` when there is one. */
export interface TraceHeaders {
  traceparent: string;
  tracestate?: string;
}
