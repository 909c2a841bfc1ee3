// Mutants of trace context passed through without an OpenTelemetry SDK (issue 49, item 3;
// gathered by mutants.ts): the append keeps a valid incoming traceparent / tracestate as given,
// the push delivery and a code handler get it back, and invalid or oversized headers are dropped.
// A guarantee on two paths has a mutant per path: the library (test/tracing.int.test.ts) and
// HTTP on Workers and serve (test/worker/traceContext.worker.test.ts, in both projects).
import { one, type Mutant } from "./mutant.js";

const LIBRARY = "test/tracing.int.test.ts";
const STACK = "test/worker/traceContext.worker.test.ts";
const TRACING = "src/tracing.ts";

const notStored = one(
  TRACING,
  "  if (!otel) return run(carried ? stored(carried) : null);",
  "  if (!otel) return run(null);",
);
const notPassedOn = one(
  TRACING,
  "  if (!otel) return run(passedOn(batch.traceContexts));",
  "  if (!otel) return run(undefined);",
);
const upperCaseTaken = one(
  TRACING,
  "  const traceparent = headers?.traceparent?.trim();",
  "  const traceparent = headers?.traceparent?.trim().toLowerCase();",
);
const zeroParentTaken = one(
  TRACING,
  "  if (ZERO.test(traceId) || ZERO.test(spanId)) return undefined;",
  "  if (ZERO.test(traceId)) return undefined;",
);
const longTracestateTaken = one(TRACING, "  if (value.length > MAX_HEADER) return false;\n", "");
const tracestateNotKept = one(
  TRACING,
  "  return tracestate && validTracestate(tracestate) ? { traceparent, tracestate } : { traceparent };",
  "  return { traceparent };",
);

export const traceContextMutants: Mutant[] = [
  {
    name: "traceContext: without a tracer, append(…, { trace }) not stored (the library)",
    edits: notStored,
    tests: [LIBRARY],
  },
  {
    name: "traceContext: without a tracer, an append request's context not stored (Workers, serve)",
    edits: notStored,
    tests: [STACK],
  },
  {
    name: "traceContext: an HTTP append's headers read only with a tracer (as before issue 49)",
    edits: one(
      TRACING,
      "  if (otel && isValid(activeSpan(otel.contexts))) return undefined;",
      "  if (!otel || isValid(activeSpan(otel.contexts))) return undefined;",
    ),
    tests: [STACK],
  },
  {
    name: "traceContext: without a tracer, a batch passes nothing on (the library: push and ctx.trace)",
    edits: notPassedOn,
    tests: [LIBRARY],
  },
  {
    name: "traceContext: without a tracer, a batch passes nothing on (Workers, serve: push)",
    edits: notPassedOn,
    tests: [STACK],
  },
  {
    name: "traceContext: a no-op tracer's invalid span drops the given context",
    edits: one(
      TRACING,
      "      run(isValid(own) ? traceHeaders(own) : passedOn(batch.traceContexts)),",
      "      run(isValid(own) ? traceHeaders(own) : undefined),",
    ),
    tests: [LIBRARY],
  },
  {
    name: "traceContext: a no-op tracer's invalid span stores nothing",
    edits: one(
      TRACING,
      "      run(isValid(own) ? stored(traceHeaders(own)) : carried ? stored(carried) : null),",
      "      run(isValid(own) ? stored(traceHeaders(own)) : null),",
    ),
    tests: [LIBRARY],
  },
  {
    name: "traceContext: a batch passes on its head event's context only (an untraced head hides the rest)",
    edits: one(TRACING, "  for (const value of traceContexts) {", "  for (const value of traceContexts.slice(0, 1)) {"),
    tests: [LIBRARY],
  },
  {
    name: "traceContext: a batch passes on its last traced event's context",
    edits: one(
      TRACING,
      "  for (const value of traceContexts) {",
      "  for (const value of [...traceContexts].reverse()) {",
    ),
    tests: [LIBRARY],
  },
  {
    name: "traceContext: the push delivery sends no trace headers",
    edits: one("src/pushDelivery.ts", "          ...context.trace,\n", ""),
    tests: [STACK],
  },
  {
    name: "traceContext: a code handler is not given ctx.trace",
    edits: one("src/consume/handle.ts", "    ...(trace ? { trace } : {}),\n", ""),
    tests: [LIBRARY],
  },
  { name: "traceContext: upper-case hex taken (the library)", edits: upperCaseTaken, tests: [LIBRARY] },
  { name: "traceContext: upper-case hex taken (Workers, serve)", edits: upperCaseTaken, tests: [STACK] },
  { name: "traceContext: an all-zero parent id taken (the library)", edits: zeroParentTaken, tests: [LIBRARY] },
  { name: "traceContext: an all-zero parent id taken (Workers, serve)", edits: zeroParentTaken, tests: [STACK] },
  {
    name: "traceContext: version ff taken",
    edits: one(TRACING, 'version === "ff" || (version', "false || (version"),
    tests: [LIBRARY],
  },
  {
    name: "traceContext: version 00 with more fields taken",
    edits: one(TRACING, '(version === "00" && match[5] !== undefined)', "false"),
    tests: [LIBRARY],
  },
  {
    name: "traceContext: a traceparent over 512 characters taken",
    edits: one(TRACING, "value.length <= MAX_HEADER ? TRACEPARENT.exec(value) : null", "TRACEPARENT.exec(value)"),
    tests: [LIBRARY],
  },
  {
    name: "traceContext: a tracestate over 512 characters kept (the library)",
    edits: longTracestateTaken,
    tests: [LIBRARY],
  },
  {
    name: "traceContext: a tracestate over 512 characters kept (Workers, serve)",
    edits: longTracestateTaken,
    tests: [STACK],
  },
  {
    name: "traceContext: a tracestate over 512 characters kept (Workers with the SDK)",
    edits: longTracestateTaken,
    tests: ["test/worker/tracing.worker.test.ts"],
  },
  {
    name: "traceContext: a tracestate of exactly 512 characters dropped",
    edits: one(
      TRACING,
      "  if (value.length > MAX_HEADER) return false;",
      "  if (value.length >= MAX_HEADER) return false;",
    ),
    tests: [LIBRARY],
  },
  {
    name: "traceContext: a tracestate key twice kept",
    edits: one(
      TRACING,
      "    if (key === undefined || keys.has(key)) return false;",
      "    if (key === undefined) return false;",
    ),
    tests: [LIBRARY],
  },
  {
    name: "traceContext: a tracestate member that does not parse kept",
    edits: one(
      TRACING,
      "    if (key === undefined || keys.has(key)) return false;",
      '    if (keys.has(key ?? "")) return false;',
    ),
    tests: [LIBRARY],
  },
  {
    name: "traceContext: more than 32 tracestate members kept",
    edits: one(TRACING, "  return keys.size <= MAX_MEMBERS;", "  return true;"),
    tests: [LIBRARY],
  },
  {
    name: "traceContext: an empty tracestate member refused (the W3C allows it)",
    edits: one(TRACING, '    if (trimmed === "") continue;\n', ""),
    tests: [LIBRARY],
  },
  { name: "traceContext: a valid tracestate not kept (the library)", edits: tracestateNotKept, tests: [LIBRARY] },
  { name: "traceContext: a valid tracestate not kept (Workers, serve)", edits: tracestateNotKept, tests: [STACK] },
];
