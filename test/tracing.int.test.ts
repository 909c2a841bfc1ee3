// OpenTelemetry traces on Node (docs/operations.md, "Traces"), with the SDK's in-memory exporter
// registered the way an app registers it (trace.setGlobalTracerProvider, an AsyncLocalStorage
// context manager): corq reads the API's global registry and never imports the API itself
// (src/tracing.ts). Real Postgres, a real HTTP receiver, and startServe over real HTTP.
import { AsyncLocalStorage } from "node:async_hooks";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  context,
  INVALID_SPAN_CONTEXT,
  ROOT_CONTEXT,
  trace,
  type Context,
  type ContextManager,
  type Tracer,
} from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from "@opentelemetry/sdk-trace-base";
import type { DeliveredEvent, HandlerContext, TraceHeaders } from "../src/index.js";
import { startServe } from "../src/node/serve.js";
import { drain, useCorq } from "./helpers/corq.js";
import { startReceiver } from "./helpers/receiver.js";
import { present } from "./helpers/present.js";
import { eventually } from "./helpers/until.js";

/** What Node's SDK registers (@opentelemetry/context-async-hooks), in a few lines. */
class AsyncContextManager implements ContextManager {
  private readonly storage = new AsyncLocalStorage<Context>();
  active() {
    return this.storage.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    ctx: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.storage.run(ctx, () => fn.apply(thisArg, args));
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable() {
    return this;
  }
  disable() {
    this.storage.disable();
    return this;
  }
}

const exporter = new InMemorySpanExporter();
const registerTracer = () =>
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
beforeAll(() => {
  registerTracer();
  context.setGlobalContextManager(new AsyncContextManager());
});
afterAll(() => {
  trace.disable();
  context.disable();
});
afterEach(() => exporter.reset());

const open = useCorq();
const spans = (name: string) => exporter.getFinishedSpans().filter((span) => span.name === name);
const idOf = (span: ReadableSpan) => span.spanContext().spanId;
const traceOf = (span: ReadableSpan) => span.spanContext().traceId;
const linkIds = (span: ReadableSpan) => span.links.map((link) => link.context.spanId);
const traceparentOf = (span: ReadableSpan) => `00-${traceOf(span)}-${idOf(span)}-01`;
const storedContexts = async (raw: { query(sql: string): Promise<{ rows: { trace_context: string | null }[] }> }) =>
  (await raw.query("SELECT trace_context FROM corq.events ORDER BY position")).rows.map((r) => r.trace_context);

describe("the send span", () => {
  it("is the child of the caller's active span; every event of the append keeps its context", async () => {
    const { corq, raw } = await open();
    const caller = trace.getTracer("app").startSpan("checkout");
    await context.with(trace.setSpan(context.active(), caller), () =>
      corq.append("order-1", [
        { name: "OrderPlaced", data: { k: "ada" } },
        { name: "OrderPaid", data: { k: "ada" } },
      ]),
    );
    caller.end();
    const [send] = spans("send");
    expect(send).toBeDefined();
    const span = present(send, "the send span");
    expect(span.kind).toBe(3); // PRODUCER
    expect(span.parentSpanContext?.spanId).toBe(caller.spanContext().spanId);
    expect(traceOf(span)).toBe(caller.spanContext().traceId);
    expect(span.attributes).toMatchObject({
      "messaging.system": "corq",
      "messaging.operation.type": "send",
      "messaging.operation.name": "send",
      "messaging.destination.name": "order-1",
      "messaging.batch.message_count": 2,
      "corq.stream.version": 1,
    });
    expect(await storedContexts(raw)).toEqual([traceparentOf(span), traceparentOf(span)]);
  });

  it("takes an explicit W3C parent (traceparent and tracestate), and carries the tracestate on the events", async () => {
    const { corq, raw } = await open();
    const parent = {
      traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
      tracestate: "congo=t61rcWkgMzE",
    };
    await corq.append("order-1", [{ name: "OrderPlaced", data: {} }], { trace: parent });
    const span = present(spans("send")[0], "the send span");
    expect(traceOf(span)).toBe("0af7651916cd43dd8448eb211c80319c");
    expect(span.parentSpanContext?.spanId).toBe("b7ad6b7169203331");
    expect(await storedContexts(raw)).toEqual([`${traceparentOf(span)} congo=t61rcWkgMzE`]);
  });

  it("an outbox append in the caller's transaction and an idempotent one (and its replay) are send spans too", async () => {
    const { corq, raw } = await open();
    const client = await raw.connect();
    try {
      await client.query("BEGIN");
      await corq.append("order-1", [{ name: "OrderPlaced", data: {} }], { tx: client });
      await client.query("COMMIT");
    } finally {
      client.release();
    }
    const first = await corq.append("order-2", [{ name: "OrderPlaced", data: {} }], { idempotencyKey: "k-1" });
    const again = await corq.append("order-2", [{ name: "OrderPlaced", data: {} }], { idempotencyKey: "k-1" });
    expect(again).toMatchObject({ replayed: true, positions: first.positions });
    const [outbox, idempotent, replay] = spans("send");
    expect(present(outbox, "outbox").attributes).toMatchObject({ "corq.outbox": true });
    expect(present(idempotent, "idempotent").attributes).toMatchObject({ "corq.idempotent": true });
    expect(present(idempotent, "idempotent").attributes["corq.replayed"]).toBeUndefined();
    expect(present(replay, "replay").attributes).toMatchObject({ "corq.idempotent": true, "corq.replayed": true });
    // the replay wrote nothing: the event keeps the first append's context
    expect(await storedContexts(raw)).toEqual([
      traceparentOf(present(outbox, "outbox")),
      traceparentOf(present(idempotent, "idempotent")),
    ]);
  });

  it("a refused append is a send span with an error status", async () => {
    const { corq } = await open();
    await expect(corq.append("order-1", [{ name: "OrderPlaced", data: {} }], { expectedVersion: 3 })).rejects.toThrow();
    const span = present(spans("send")[0], "the send span");
    expect(span.status).toMatchObject({ code: 2 });
    expect(span.attributes["error.type"]).toBe("version_conflict");
  });
});

describe("the process span", () => {
  it("links every attempt at a batch to its events' send spans: failed, dead, retried from the dead letters, rewound", async () => {
    const seen: { attempt: number; trace?: TraceHeaders; active?: string }[] = [];
    let failing = true;
    const { corq, raw } = await open({
      subscriptions: [
        {
          name: "ledger",
          key: "data.k",
          maxAttempts: 2,
          backoff: { initialMs: 0, maxMs: 0 },
          async handle(_events: DeliveredEvent[], ctx: HandlerContext) {
            seen.push({ attempt: ctx.attempt, trace: ctx.trace, active: trace.getActiveSpan()?.spanContext().spanId });
            if (failing) throw new TypeError("the ledger is closed");
          },
        },
      ],
    });
    await corq.append("order-1", [{ name: "OrderPlaced", data: { k: "ada" } }]);
    await corq.append("order-2", [{ name: "OrderPlaced", data: { k: "ada" } }]);
    const sends = spans("send").map(idOf);
    expect(sends).toHaveLength(2);
    expect(await storedContexts(raw)).toHaveLength(2);

    // two failed attempts (the head event alone after the first): dead
    await drain(corq, "ledger");
    expect((await corq.key("ledger", "ada")).status).toBe("dead");
    failing = false;
    await corq.releaseDeadLetters({ subscription: "ledger", mode: "retry" });
    await drain(corq, "ledger");
    await corq.rewind("ledger", { to: "beginning" });
    await corq.drain("ledger", { budgetMs: 5000 });

    const processed = spans("process ledger");
    expect(processed.map((span) => [span.attributes["corq.attempt"], linkIds(span)])).toEqual([
      [1, sends], // the first batch: both events, failed
      [2, [sends[0]]], // after a failure, the head event alone: failed, dead
      [1, sends], // retried from the dead letters
      [1, sends], // rewound: queued again, same events, same links
    ]);
    for (const span of processed) {
      expect(span.kind).toBe(4); // CONSUMER
      // the head event's send span is the parent: the append's trace reads on into each attempt
      expect(span.parentSpanContext?.spanId).toBe(sends[0]);
      expect(traceOf(span)).toBe(traceOf(present(spans("send")[0], "send")));
      expect(span.attributes).toMatchObject({
        "messaging.system": "corq",
        "messaging.operation.type": "process",
        "messaging.consumer.group.name": "ledger",
        "corq.key": "ada",
      });
    }
    expect(processed.map((span) => span.attributes["messaging.batch.message_count"])).toEqual([2, 1, 2, 2]);
    expect(processed.slice(0, 2).map((span) => span.status)).toEqual([
      { code: 2, message: "TypeError: the ledger is closed" },
      { code: 2, message: "TypeError: the ledger is closed" },
    ]);
    expect(processed[0]?.attributes["error.type"]).toBe("TypeError");
    expect(processed.slice(2).map((span) => span.status.code)).toEqual([0, 0]);
    // the handler ran inside its span, and was told its traceparent
    expect(seen.map((s) => s.active)).toEqual(processed.map(idOf));
    expect(seen.map((s) => s.trace?.traceparent)).toEqual(processed.map(traceparentOf));
  });

  it("a push delivery sends its process span's traceparent: the receiver joins the append's trace", async () => {
    const receiver = await startReceiver(() => undefined);
    try {
      const { corq } = await open({ pushAllowPrivate: true });
      await corq.putSubscription("rooms-hook", {
        key: "data.roomId",
        maxAttempts: 3,
        backoff: { initialMs: 0, maxMs: 0 },
        deliver: { url: receiver.url, timeoutMs: 2000 },
      });
      const caller = {
        traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        tracestate: "rojo=00f067aa0ba902b7",
      };
      await corq.append("visit-1", [{ name: "Arrived", data: { roomId: "lobby" } }], { trace: caller });
      receiver.behave((delivery) => (delivery.attempt === 1 ? { status: 500 } : undefined));
      await drain(corq, "rooms-hook");
      const processed = spans("process rooms-hook");
      expect(processed).toHaveLength(2);
      expect(receiver.deliveries.map((d) => d.headers.traceparent)).toEqual(processed.map(traceparentOf));
      expect(receiver.deliveries.map((d) => d.headers.tracestate)).toEqual([
        "rojo=00f067aa0ba902b7",
        "rojo=00f067aa0ba902b7",
      ]);
      for (const delivery of receiver.deliveries) {
        expect(String(delivery.headers.traceparent)).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/);
      }
      const send = present(spans("send")[0], "the send span");
      expect(processed.map(linkIds)).toEqual([[idOf(send)], [idOf(send)]]);
      expect(processed.map((span) => span.status)).toEqual([{ code: 2, message: "Error: HTTP 500" }, { code: 0 }]);
    } finally {
      await receiver.close();
    }
  });
});

describe("over HTTP (startServe)", () => {
  it("POST /streams/:stream/events continues the request's traceparent; an invalid one is ignored, the answer unchanged", async () => {
    const { url } = await open();
    const handled: string[] = [];
    const running = await startServe({
      subscriptions: [
        {
          name: "audit",
          key: "data.k",
          handle: (events: DeliveredEvent[], ctx: HandlerContext) => {
            handled.push(...events.map(() => present(ctx.trace, "ctx.trace").traceparent));
          },
        },
      ],
      env: { DATABASE_URL: url, CORQ_ADMIN_TOKEN: "a".repeat(32), CORQ_SAFETY_NET_MS: "100" },
      port: 0,
      log: () => undefined,
    });
    try {
      const post = (stream: string, headers: Record<string, string>) =>
        fetch(`${running.url}/streams/${stream}/events`, {
          method: "POST",
          headers: { authorization: `Bearer ${"a".repeat(32)}`, "content-type": "application/json", ...headers },
          body: JSON.stringify({ events: [{ name: "Seen", data: { k: stream } }] }),
        }).then(async (response) => ({ status: response.status, body: await response.json() }));
      const traced = await post("s-1", {
        traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        tracestate: "congo=t61rcWkgMzE",
      });
      const invalid = await post("s-2", { traceparent: "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01" });
      const plain = await post("s-3", {});
      expect([traced, invalid, plain].map((r) => r.status)).toEqual([201, 201, 201]);
      expect(traced.body).toEqual({ stream: "s-1", version: 0, positions: [1] });
      expect(invalid.body).toEqual({ stream: "s-2", version: 0, positions: [2] });
      await eventually(() => {
        expect(spans("process audit")).toHaveLength(3);
        return Promise.resolve();
      });
      const sends = spans("send");
      const fromHeader = present(
        sends.find((span) => span.attributes["messaging.destination.name"] === "s-1"),
        "s-1's send span",
      );
      expect(traceOf(fromHeader)).toBe("0af7651916cd43dd8448eb211c80319c");
      expect(fromHeader.parentSpanContext?.spanId).toBe("b7ad6b7169203331");
      // the invalid traceparent: a new trace, as without one
      expect(sends.filter((span) => traceOf(span) === "0af7651916cd43dd8448eb211c80319c")).toHaveLength(1);
      const audit = present(
        spans("process audit").find((span) => span.attributes["corq.key"] === "s-1"),
        "s-1's process span",
      );
      expect(linkIds(audit)).toEqual([idOf(fromHeader)]);
      expect(traceOf(audit)).toBe("0af7651916cd43dd8448eb211c80319c");
      expect(handled).toContain(traceparentOf(audit));
    } finally {
      await running.stop();
    }
  });
});

describe("invalid or oversized headers, with the SDK", () => {
  it("an invalid traceparent starts a new trace; an invalid tracestate is dropped, its traceparent kept", async () => {
    const { corq, raw } = await open();
    // upper-case hex is not W3C (it was once lower-cased and taken)
    await corq.append("s-1", [{ name: "A", data: {} }], {
      trace: { traceparent: `00-${TRACE.toUpperCase()}-${SPAN}-01` },
    });
    await corq.append("s-2", [{ name: "A", data: {} }], {
      trace: { traceparent: `00-${TRACE}-${SPAN}-01`, tracestate: `a=${"x".repeat(511)}` },
    });
    const [fresh, continued] = spans("send");
    expect(traceOf(present(fresh, "s-1's send span"))).not.toBe(TRACE);
    expect(present(fresh, "s-1's send span").parentSpanContext).toBeUndefined();
    expect(traceOf(present(continued, "s-2's send span"))).toBe(TRACE);
    expect(await storedContexts(raw)).toEqual([
      traceparentOf(present(fresh, "s-1")),
      traceparentOf(present(continued, "s-2")), // no tracestate
    ]);
  });
});

const TRACE = "0af7651916cd43dd8448eb211c80319c";
const SPAN = "b7ad6b7169203331";
const TRACEPARENT = `00-${TRACE}-${SPAN}-01`;

/** Runs `fn` with no tracer registered (the global provider is the API's no-op again). */
async function untraced(fn: () => Promise<void>) {
  trace.disable();
  try {
    await fn();
    expect(exporter.getFinishedSpans()).toEqual([]);
  } finally {
    registerTracer();
  }
}

describe("a tracer that makes no valid span (a no-op one)", () => {
  it("the given context is kept and sent on as without a tracer", async () => {
    const noop = { startSpan: () => trace.wrapSpanContext(INVALID_SPAN_CONTEXT) };
    trace.disable();
    trace.setGlobalTracerProvider({ getTracer: () => noop as unknown as Tracer });
    try {
      const traces: (TraceHeaders | undefined)[] = [];
      const { corq, raw } = await open({
        subscriptions: [
          {
            name: "plain",
            key: "stream",
            handle: (_events: DeliveredEvent[], ctx: HandlerContext) => void traces.push(ctx.trace),
          },
        ],
      });
      await corq.append("order-1", [{ name: "OrderPlaced", data: {} }], { trace: { traceparent: TRACEPARENT } });
      expect(await storedContexts(raw)).toEqual([TRACEPARENT]);
      await drain(corq, "plain");
      expect(traces).toEqual([{ traceparent: TRACEPARENT }]);
    } finally {
      trace.disable();
      registerTracer();
    }
  });
});

describe("without a tracer", () => {
  it("nothing is traced and nothing more is stored: trace_context stays null, ctx.trace undefined", () =>
    untraced(async () => {
      const traces: (TraceHeaders | undefined)[] = [];
      const { corq, raw } = await open({
        subscriptions: [
          { name: "plain", handle: (_events: DeliveredEvent[], ctx: HandlerContext) => void traces.push(ctx.trace) },
        ],
      });
      await corq.append("order-1", [{ name: "OrderPlaced", data: {} }]);
      await drain(corq, "plain");
      expect(await storedContexts(raw)).toEqual([null]);
      expect(traces).toEqual([undefined]);
    }));

  it("append(…, { trace }) is kept with each event as given; consume, drain and a transactional handler get it as ctx.trace", () =>
    untraced(async () => {
      const traces: Record<string, (TraceHeaders | undefined)[]> = { plain: [], drained: [], tx: [] };
      const record = (name: string) => (_events: DeliveredEvent[], ctx: HandlerContext) =>
        void traces[name]?.push(ctx.trace);
      const { corq, raw } = await open({
        subscriptions: [
          { name: "plain", handle: record("plain") },
          { name: "drained", handle: record("drained") },
          { name: "tx", transactional: true, handle: record("tx") },
        ],
      });
      const given = { traceparent: TRACEPARENT, tracestate: "congo=t61rcWkgMzE, rojo=00f067aa0ba902b7" };
      await corq.append(
        "order-1",
        [
          { name: "OrderPlaced", data: {} },
          { name: "OrderPaid", data: {} },
        ],
        { trace: given },
      );
      expect(await storedContexts(raw)).toEqual([
        `${TRACEPARENT} congo=t61rcWkgMzE, rojo=00f067aa0ba902b7`,
        `${TRACEPARENT} congo=t61rcWkgMzE, rojo=00f067aa0ba902b7`,
      ]);
      await corq.advance();
      expect(await corq.consume("plain")).toMatchObject({ events: 2, outcome: "acked" });
      // corq.drain: the runtimes' way (the Worker's and serve's consumers)
      expect(await corq.drain("drained", { budgetMs: 5000 })).toMatchObject({ events: 2 });
      await drain(corq, "tx");
      expect(traces).toEqual({ plain: [given], drained: [given], tx: [given] });
    }));

  it("a push delivery sends on the first context among its batch's events, as given; an untraced batch sends none", () =>
    untraced(async () => {
      const receiver = await startReceiver(() => undefined);
      try {
        const { corq } = await open({ pushAllowPrivate: true });
        await corq.putSubscription("rooms-hook", {
          key: "data.roomId",
          batchSize: 10,
          maxAttempts: 3,
          backoff: { initialMs: 0, maxMs: 0 },
          deliver: { url: receiver.url, timeoutMs: 2000 },
        });
        const other = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        await corq.append("visit-1", [{ name: "Arrived", data: { roomId: "lobby" } }]);
        await corq.append("visit-2", [{ name: "Arrived", data: { roomId: "lobby" } }], {
          trace: { traceparent: TRACEPARENT, tracestate: "rojo=00f067aa0ba902b7" },
        });
        await corq.append("visit-3", [{ name: "Arrived", data: { roomId: "lobby" } }], {
          trace: { traceparent: other },
        });
        await corq.append("visit-4", [{ name: "Arrived", data: { roomId: "hall" } }], {
          trace: { traceparent: other },
        });
        // lobby's first delivery fails, once
        let failed = false;
        receiver.behave((delivery) => {
          if (delivery.key !== "lobby" || failed) return undefined;
          failed = true;
          return { status: 500 };
        });
        await drain(corq, "rooms-hook");
        const sent = (key: string) =>
          receiver.deliveries
            .filter((d) => d.key === key)
            .map((d) => [d.events.length, d.headers.traceparent, d.headers.tracestate]);
        // lobby: the untraced head event, then visit-2's (as given), then visit-3's; the retry after
        // the failure is the head event alone, untraced
        expect(sent("lobby")).toEqual([
          [3, TRACEPARENT, "rojo=00f067aa0ba902b7"],
          [1, undefined, undefined],
          [2, TRACEPARENT, "rojo=00f067aa0ba902b7"],
        ]);
        expect(sent("hall")).toEqual([[1, other, undefined]]);
      } finally {
        await receiver.close();
      }
    }));

  it("invalid or oversized headers are dropped, never stored; the append succeeds", () =>
    untraced(async () => {
      const { corq, raw } = await open();
      const invalid = [
        `00-${TRACE.toUpperCase()}-${SPAN}-01`, // upper-case hex
        `00-${"0".repeat(32)}-${SPAN}-01`, // all-zero trace id
        `00-${TRACE}-${"0".repeat(16)}-01`, // all-zero parent id
        `ff-${TRACE}-${SPAN}-01`, // version ff
        `00-${TRACE}-${SPAN}-01-extra`, // version 00 with more fields
        `00-${TRACE}-${SPAN}-1`, // short flags
        `00-${TRACE.slice(2)}-${SPAN}-01`, // short trace id
        `00_${TRACE}_${SPAN}_01`,
        `01-${TRACE}-${SPAN}-01-${"x".repeat(460)}`, // a later version, 515 characters
        "",
      ];
      for (const [i, traceparent] of invalid.entries()) {
        await corq.append(`bad-${i}`, [{ name: "A", data: {} }], { trace: { traceparent, tracestate: "rojo=1" } });
      }
      const tracestates = [
        `a=${"x".repeat(254)},b=${"x".repeat(253)}`, // 512 characters: kept
        `a=${"x".repeat(254)},b=${"x".repeat(254)}`, // 513
        "Rojo=1", // an upper-case key
        "rojo=1,rojo=2", // a key twice
        "rojo", // no value
        "rojo=a,b", // a value with a comma (a member "b" without "=")
        "rojo=a=b", // a value with "="
        Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(","), // 33 members
        Array.from({ length: 32 }, (_, i) => `k${i}=v`).join(","), // 32: kept
        "t61@dd=1, ,congo=2", // multi-tenant key, an empty member: kept
      ];
      for (const [i, tracestate] of tracestates.entries()) {
        await corq.append(`state-${i}`, [{ name: "A", data: {} }], { trace: { traceparent: TRACEPARENT, tracestate } });
      }
      // a later version's longer traceparent, as given
      const later = `cc-${TRACE}-${SPAN}-01-what-the-future-will-bring`;
      await corq.append("later", [{ name: "A", data: {} }], { trace: { traceparent: later } });
      const stored = await storedContexts(raw);
      expect(stored.slice(0, invalid.length)).toEqual(invalid.map(() => null));
      expect(stored.slice(invalid.length)).toEqual([
        `${TRACEPARENT} ${tracestates[0]}`,
        ...Array.from({ length: 7 }, () => TRACEPARENT),
        `${TRACEPARENT} ${tracestates[8]}`,
        `${TRACEPARENT} ${tracestates[9]}`,
        later,
      ]);
    }));

  it("over HTTP (startServe): the request's headers reach the push receiver as given; an invalid one is dropped, 201", () =>
    untraced(async () => {
      const receiver = await startReceiver(() => undefined);
      const { url, corq } = await open({ pushAllowPrivate: true });
      await corq.putSubscription("hook", { key: "stream", deliver: { url: receiver.url, timeoutMs: 2000 } });
      const running = await startServe({
        subscriptions: [],
        env: {
          DATABASE_URL: url,
          CORQ_ADMIN_TOKEN: "a".repeat(32),
          CORQ_SAFETY_NET_MS: "100",
          CORQ_PUSH_ALLOW_PRIVATE: "true",
        },
        port: 0,
        log: () => undefined,
      });
      try {
        const post = (stream: string, headers: Record<string, string>) =>
          fetch(`${running.url}/streams/${stream}/events`, {
            method: "POST",
            headers: { authorization: `Bearer ${"a".repeat(32)}`, "content-type": "application/json", ...headers },
            body: JSON.stringify({ events: [{ name: "Seen", data: {} }] }),
          }).then((response) => response.status);
        const statuses = [
          await post("s-1", { traceparent: TRACEPARENT, tracestate: "congo=t61rcWkgMzE" }),
          await post("s-2", { traceparent: `00-${TRACE}-${"0".repeat(16)}-01`, tracestate: "congo=t61rcWkgMzE" }),
          await post("s-3", { traceparent: TRACEPARENT, tracestate: `a=${"x".repeat(511)}` }),
        ];
        expect(statuses).toEqual([201, 201, 201]);
        await eventually(() => {
          expect(receiver.deliveries).toHaveLength(3);
          return Promise.resolve();
        });
        const byKey = Object.fromEntries(
          receiver.deliveries.map((d) => [d.key, [d.headers.traceparent, d.headers.tracestate]]),
        );
        expect(byKey).toEqual({
          "s-1": [TRACEPARENT, "congo=t61rcWkgMzE"],
          "s-2": [undefined, undefined],
          "s-3": [TRACEPARENT, undefined],
        });
      } finally {
        await running.stop();
        await receiver.close();
      }
    }));
});
