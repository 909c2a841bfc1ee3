// OpenTelemetry traces from append to handler (docs/operations.md, "Traces"): an append is a
// `send` span, each handled batch a `process <subscription>` span linked to the contexts its
// events were appended under, which every event keeps (events.trace_context).
//
// Without a registered tracer corq is a carrier, as a broker is (Kafka record headers, SQS
// AWSTraceHeader): a valid incoming traceparent / tracestate (an append request's headers,
// `append(…, { trace })`) is stored with each event as it was given and sent on with the push
// delivery of its batch, and given to a code handler as `ctx.trace`. An invalid or oversized one is
// dropped (the W3C rule: ignored, never an error), never stored.
//
// How @opentelemetry/api stays optional: corq never imports it. It reads what the API itself
// shares between its copies — the global registry `globalThis[Symbol.for("opentelemetry.js.api.1")]`,
// where `trace.setGlobalTracerProvider()` (and every SDK's `register()`) puts the tracer
// provider and context manager, and `Symbol.for("OpenTelemetry Context Key SPAN")`, the context
// key of the active span. The alternatives fail a part of the brief:
//   - a static `import "@opentelemetry/api"`, or a literal `import("@opentelemetry/api")`: esbuild
//     and wrangler resolve it at build time, and a user's Worker without the package no longer
//     builds (vercel/storage#611 went back to a required peer for this reason);
//   - a specifier built at run time so no bundler sees it (vercel/workflow#1947): Node loads it,
//     but a Worker has no module resolution at run time, so Workers would never trace;
//   - a regular dependency: every install pays for it, and it is one more copy of the API
//     beside the user's (they meet in this same registry anyway);
//   - a user-passed API object: works everywhere, but every entry point (createCorq,
//     createWorker, serve) grows an option users must thread through.
// The registry is the API's own contract between its copies for the whole 1.x major (the key
// names the major; Deno and Bun fill it natively), so whichever copy the user registered with,
// corq sees it. The types below are the few members corq calls, written out here.
//
// Cost: with no tracer registered, one property read per append and per batch; an append that
// brings no trace context writes nothing more (trace_context stays null), one that does has its
// headers checked (two regular expressions) and stored.

import type { TraceHeaders } from "./types.js";

type Attributes = Record<string, string | number | boolean>;

/** What a batch's result adds to its span: an error (ERROR status) and attributes. */
export interface SpanOutcome {
  error?: { type: string; message: string };
  attributes?: Attributes;
}

interface Context {
  getValue(key: symbol): unknown;
  setValue(key: symbol, value: unknown): Context;
  deleteValue(key: symbol): Context;
}

interface TraceState {
  get(key: string): string | undefined;
  set(key: string, value: string): TraceState;
  unset(key: string): TraceState;
  serialize(): string;
}

interface SpanContext {
  traceId: string;
  spanId: string;
  traceFlags: number;
  isRemote?: boolean;
  traceState?: TraceState;
}

interface Span {
  spanContext(): SpanContext;
  setAttribute(key: string, value: string | number | boolean): unknown;
  setStatus(status: { code: number; message?: string }): unknown;
  recordException(exception: Error | string): void;
  end(): void;
}

interface Tracer {
  startSpan(
    name: string,
    options: { kind: number; attributes: Attributes; links?: { context: SpanContext }[] },
    context: Context,
  ): Span;
}

interface Registry {
  trace?: { getTracer(name: string): Tracer };
  context?: { active(): Context; with<T>(context: Context, fn: () => T): T };
}

const REGISTRY = Symbol.for("opentelemetry.js.api.1");
const SPAN_KEY = Symbol.for("OpenTelemetry Context Key SPAN");
// @opentelemetry/api's enums, by value
const PRODUCER = 3;
const CONSUMER = 4;
const ERROR = 2;

/** The registered tracer and context manager; undefined (the fast path) when no tracer is registered. */
function registered(): { tracer: Tracer; contexts: Registry["context"] } | undefined {
  const registry = (globalThis as Record<symbol, Registry | undefined>)[REGISTRY];
  const provider = registry?.trace;
  if (!provider) return undefined;
  return { tracer: provider.getTracer("corqueue"), contexts: registry.context };
}

/** A context of our own, for when no context manager is registered (Workers, usually). */
class ValuesContext implements Context {
  constructor(private readonly values = new Map<symbol, unknown>()) {}
  getValue(key: symbol) {
    return this.values.get(key);
  }
  setValue(key: symbol, value: unknown): Context {
    return new ValuesContext(new Map(this.values).set(key, value));
  }
  deleteValue(key: symbol): Context {
    const values = new Map(this.values);
    values.delete(key);
    return new ValuesContext(values);
  }
}
const ROOT: Context = new ValuesContext();

/** A tracestate as received: kept as it is, read only by a sampler or exporter that asks. */
class RawTraceState implements TraceState {
  constructor(private readonly raw: string) {}
  private entries() {
    return this.raw
      .split(",")
      .map((member) => member.trim())
      .filter((member) => member !== "")
      .map((member) => [member.slice(0, member.indexOf("=")), member.slice(member.indexOf("=") + 1)] as const);
  }
  private without(key: string) {
    return this.entries()
      .filter(([k]) => k !== key)
      .map(([k, v]) => `${k}=${v}`);
  }
  get(key: string) {
    return this.entries().find(([k]) => k === key)?.[1];
  }
  set(key: string, value: string): TraceState {
    return new RawTraceState([`${key}=${value}`, ...this.without(key)].join(","));
  }
  unset(key: string): TraceState {
    return new RawTraceState(this.without(key).join(","));
  }
  serialize() {
    return this.raw;
  }
}

// W3C Trace Context (https://www.w3.org/TR/trace-context/): version-traceid-parentid-flags in
// lowercase hex; a version above 00 may add fields after the flags (visible ASCII here, no space:
// events.trace_context separates the tracestate with one); version ff is invalid.
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[\x21-\x7e]*)?$/;
const ZERO = /^0+$/;
// A tracestate list member, its surrounding spaces and tabs trimmed: a simple key or a
// multi-tenant key (tenant@system), "=", a value of up to 256 printable characters, no "," or
// "=", not ending in a space.
const TRACESTATE_MEMBER =
  /^([a-z][a-z0-9_*/-]{0,255}|[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13})=([\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e])$/;
// each header, as stored and sent on: the W3C asks a vendor to pass on a tracestate of up to 512
// characters (a longer one may be dropped), and corq keeps no longer traceparent either
const MAX_HEADER = 512;
const MAX_MEMBERS = 32;

function validTraceparent(value: string): RegExpExecArray | undefined {
  const match = value.length <= MAX_HEADER ? TRACEPARENT.exec(value) : null;
  if (!match) return undefined;
  const [, version, traceId = "", spanId = ""] = match;
  // version ff is invalid; version 00 has nothing after the flags (a later version may)
  if (version === "ff" || (version === "00" && match[5] !== undefined)) return undefined;
  if (ZERO.test(traceId) || ZERO.test(spanId)) return undefined;
  return match;
}

/** A tracestate that keeps the W3C list rules: at most 32 members, each key once, ≤ 512 characters. */
function validTracestate(value: string): boolean {
  if (value.length > MAX_HEADER) return false;
  const keys = new Set<string>();
  for (const member of value.split(",")) {
    const trimmed = member.replace(/^[ \t]+|[ \t]+$/g, "");
    // empty and whitespace-only members are allowed
    if (trimmed === "") continue;
    const match = TRACESTATE_MEMBER.exec(trimmed);
    const key = match?.[1];
    if (key === undefined || keys.has(key)) return false;
    keys.add(key);
  }
  return keys.size <= MAX_MEMBERS;
}

/**
 * The W3C headers as given (trimmed), when the traceparent is valid; its tracestate only when
 * that is valid too. Undefined otherwise — an invalid header is ignored, never an error.
 */
export function validTrace(headers: Partial<TraceHeaders> | undefined): TraceHeaders | undefined {
  const traceparent = headers?.traceparent?.trim();
  if (traceparent === undefined || !validTraceparent(traceparent)) return undefined;
  const tracestate = headers?.tracestate?.trim();
  return tracestate && validTracestate(tracestate) ? { traceparent, tracestate } : { traceparent };
}

/**
 * The span context a traceparent (and tracestate) names, or undefined when it is not a valid
 * one (validTrace).
 */
export function parseTrace(headers: Partial<TraceHeaders> | undefined): SpanContext | undefined {
  const valid = validTrace(headers);
  const match = valid && validTraceparent(valid.traceparent);
  if (!valid || !match) return undefined;
  const [, , traceId = "", spanId = "", flags = ""] = match;
  return {
    traceId,
    spanId,
    traceFlags: Number.parseInt(flags, 16) & 0xff,
    isRemote: true,
    ...(valid.tracestate ? { traceState: new RawTraceState(valid.tracestate) } : {}),
  };
}

/** A span context as W3C headers. */
export function traceHeaders(context: SpanContext): TraceHeaders {
  const flags = (context.traceFlags & 0xff).toString(16).padStart(2, "0");
  const traceparent = `00-${context.traceId}-${context.spanId}-${flags}`;
  const tracestate = context.traceState?.serialize();
  return tracestate ? { traceparent, tracestate } : { traceparent };
}

/** As events.trace_context holds it: the traceparent, then a space and the tracestate (a traceparent has no space). */
const stored = ({ traceparent, tracestate }: TraceHeaders) =>
  tracestate ? `${traceparent} ${tracestate}` : traceparent;

/** events.trace_context as W3C headers (checked again: what is sent on is always valid). */
function storedHeaders(value: string | null | undefined): TraceHeaders | undefined {
  if (!value) return undefined;
  const space = value.indexOf(" ");
  return space === -1
    ? validTrace({ traceparent: value })
    : validTrace({ traceparent: value.slice(0, space), tracestate: value.slice(space + 1) });
}

const fromStored = (value: string | null | undefined) => parseTrace(storedHeaders(value));

/**
 * What a batch passes on without a span of its own (no tracer, or one that made no valid span):
 * the context of its first event that has one, as stored. A batch's events may come from many
 * appends; the first traced one's trace is the one a receiver joins (with a tracer, the
 * `process` span's parent is the head event's and it links to all of them).
 */
const passedOn = (traceContexts: readonly (string | null | undefined)[]): TraceHeaders | undefined => {
  for (const value of traceContexts) {
    const headers = storedHeaders(value);
    if (headers) return headers;
  }
  return undefined;
};

const isValid = (context: SpanContext | undefined): context is SpanContext =>
  context !== undefined && !ZERO.test(context.traceId) && !ZERO.test(context.spanId);

/** A parent given as a span context: the span the API would wrap it in (non-recording). */
function remote(context: SpanContext): Span {
  return {
    spanContext: () => context,
    setAttribute: () => undefined,
    setStatus: () => undefined,
    recordException: () => undefined,
    end: () => undefined,
  };
}

const activeSpan = (contexts: Registry["context"]) =>
  (contexts?.active().getValue(SPAN_KEY) as Span | undefined)?.spanContext();

/**
 * The trace an HTTP append continues: with a tracer, none when a span is active (a server
 * instrumentation's, itself a child of the request's traceparent: the append's span goes under
 * it); else the request's W3C headers as given, if they are valid (without a tracer, what each
 * event keeps and its push delivery sends on).
 */
export function requestTrace(headers: Partial<TraceHeaders>): TraceHeaders | undefined {
  const otel = registered();
  if (otel && isValid(activeSpan(otel.contexts))) return undefined;
  return validTrace(headers);
}

/** How a failure reads on a span: ERROR status with its message, the exception, `error.type`. */
function failed(span: Span, error: { type: string; message: string; exception?: unknown }) {
  span.setAttribute("error.type", error.type);
  span.setStatus({ code: ERROR, message: error.message });
  if (error.exception instanceof Error) span.recordException(error.exception);
}

/**
 * Runs an append as a `send` span (PRODUCER), the child of `parent` when given (the request's
 * traceparent) or else of the active context. `run` gets what each appended event keeps as its
 * trace context: the span's; with no tracer registered, `parent` as given when it is valid, else
 * null (nothing traced, nothing more written).
 */
export async function traceAppend<T>(
  append: { stream: string; count: number; parent?: TraceHeaders; attributes?: Attributes },
  run: (traceContext: string | null) => Promise<T>,
  after?: (result: T) => Attributes,
): Promise<T> {
  const carried = validTrace(append.parent);
  const otel = registered();
  if (!otel) return run(carried ? stored(carried) : null);
  const active = otel.contexts?.active() ?? ROOT;
  const given = parseTrace(carried);
  const parent = given ? active.setValue(SPAN_KEY, remote(given)) : active;
  const span = otel.tracer.startSpan(
    "send",
    {
      kind: PRODUCER,
      attributes: {
        "messaging.system": "corq",
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.destination.name": append.stream,
        "messaging.batch.message_count": append.count,
        ...append.attributes,
      },
    },
    parent,
  );
  const own = span.spanContext();
  const context = parent.setValue(SPAN_KEY, span);
  try {
    const result = await within(otel.contexts, context, () =>
      // a tracer that made no valid span (a no-op one): the given context, as without a tracer
      run(isValid(own) ? stored(traceHeaders(own)) : carried ? stored(carried) : null),
    );
    for (const [key, value] of Object.entries(after?.(result) ?? {})) span.setAttribute(key, value);
    return result;
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    failed(span, {
      type: typeof code === "string" ? code : error instanceof Error ? error.name : "Error",
      message: error instanceof Error ? error.message : String(error),
      exception: error,
    });
    throw error;
  } finally {
    span.end();
  }
}

/**
 * Runs a handled batch as a `process <subscription>` span (CONSUMER) with a link to every
 * distinct context its events were appended under (the messaging conventions' batch shape).
 * Its parent is the head event's context, so a trace that starts at an append reads on through
 * each attempt at its batch (and into a push receiver); else the active context. `run` gets the
 * span's W3C headers (for the handler and the push delivery); with no tracer registered, the
 * batch's first stored context (passedOn), unchanged. `outcome` reads the result.
 */
export async function traceBatch<T>(
  batch: { subscription: string; key: string; attempt: number; traceContexts: (string | null | undefined)[] },
  run: (trace: TraceHeaders | undefined) => Promise<T>,
  outcome: (result: T) => SpanOutcome,
): Promise<T> {
  const otel = registered();
  if (!otel) return run(passedOn(batch.traceContexts));
  const links = new Map<string, SpanContext>();
  for (const value of batch.traceContexts) {
    const context = fromStored(value);
    if (context) links.set(`${context.traceId}-${context.spanId}`, context);
  }
  const active = otel.contexts?.active() ?? ROOT;
  const head = fromStored(batch.traceContexts[0]);
  const parent = head ? active.setValue(SPAN_KEY, remote(head)) : active;
  const span = otel.tracer.startSpan(
    `process ${batch.subscription}`,
    {
      kind: CONSUMER,
      attributes: {
        "messaging.system": "corq",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.consumer.group.name": batch.subscription,
        "messaging.batch.message_count": batch.traceContexts.length,
        "corq.key": batch.key,
        "corq.attempt": batch.attempt,
      },
      links: [...links.values()].map((context) => ({ context })),
    },
    parent,
  );
  const own = span.spanContext();
  try {
    const result = await within(otel.contexts, parent.setValue(SPAN_KEY, span), () =>
      run(isValid(own) ? traceHeaders(own) : passedOn(batch.traceContexts)),
    );
    const { error, attributes } = outcome(result);
    for (const [key, value] of Object.entries(attributes ?? {})) span.setAttribute(key, value);
    if (error) failed(span, error);
    return result;
  } finally {
    span.end();
  }
}

/** `fn` with `context` active, where a context manager is registered (spans the user opens nest under ours). */
const within = <T>(contexts: Registry["context"], context: Context, fn: () => Promise<T>): Promise<T> =>
  contexts ? contexts.with(context, fn) : fn();
