// OpenTelemetry traces in the Workers runtime (workerd, the Neon driver over the local SQL
// endpoint): a Worker that registered the SDK with its in-memory exporter (fixtures/tracedWorker.ts).
// The trace of an append request's traceparent reaches the code handler's span (a link, and its
// parent) on every attempt, and the push receiver's traceparent header; invalid or oversized
// headers are ignored. test/tracing.int.test.ts covers the library and serve;
// traceContext.worker.test.ts the Worker without an SDK.
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { useReceiver } from "../helpers/receiver.js";
import { eventually, useStack } from "../helpers/stack.js";
import { present } from "../helpers/present.js";
import { app } from "./fixtures/tracedApp.js";

const { state, api } = useStack({
  // the receiver listens on 127.0.0.1: private destinations allowed, explicitly
  vars: { CORQ_PUSH_ALLOW_PRIVATE: "true" },
  worker: { entrypoint: fileURLToPath(new URL("./fixtures/tracedWorker.ts", import.meta.url)), app },
});
const hook = useReceiver();

interface Span {
  name: string;
  kind: number;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  links: { traceId: string; spanId: string }[];
  attributes: Record<string, unknown>;
  status: { code: number; message?: string };
}

const recorded = async () =>
  (await (await fetch(`${state.stack.url}/test/spans`)).json()) as {
    spans: Span[];
    handled: { key: string; attempt: number; traceparent?: string }[];
  };

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT = "00f067aa0ba902b7";

describe("traces on Workers", () => {
  it("the append request's trace reaches the handler's spans (links) and the push receiver's traceparent", async () => {
    const created = await api("PUT", "/subscriptions/traced-hook", {
      body: { events: ["Traced"], key: "data.k", from: "now", deliver: { url: hook.receiver.url, timeoutMs: 5000 } },
    });
    expect(created.status).toBe(201);
    hook.secret = created.json.secret;
    const appended = await api("POST", "/streams/t-1/events", {
      headers: { traceparent: `00-${TRACE}-${PARENT}-01`, tracestate: "rojo=00f067aa0ba902b7" },
      body: { events: [{ name: "Traced", data: { k: "a" } }] },
    });
    expect(appended).toMatchObject({ status: 201, json: { stream: "t-1", version: 0 } });

    await eventually(async () => {
      // the code handler's retry may wait for the cron's fan-out
      await state.stack.runCron().catch(() => undefined);
      const { spans } = await recorded();
      expect(spans.filter((s) => s.name === "process traced").map((s) => s.status.code)).toEqual([2, 0]);
      expect(hook.receiver.deliveries).toHaveLength(1);
    });
    const { spans, handled } = await recorded();
    const send = present(
      spans.find((s) => s.name === "send"),
      "the send span",
    );
    expect(send).toMatchObject({ kind: 3, traceId: TRACE, parentSpanId: PARENT });
    expect(send.attributes).toMatchObject({ "messaging.system": "corq", "messaging.destination.name": "t-1" });

    const processed = spans.filter((s) => s.name === "process traced");
    for (const span of processed) {
      expect(span).toMatchObject({ kind: 4, traceId: TRACE, parentSpanId: send.spanId });
      expect(span.links).toEqual([{ traceId: TRACE, spanId: send.spanId }]);
      expect(span.attributes).toMatchObject({ "messaging.consumer.group.name": "traced", "corq.key": "a" });
    }
    expect(processed.map((s) => s.attributes["corq.attempt"])).toEqual([1, 2]);
    expect(processed[0]?.status).toEqual({ code: 2, message: "Error: the first attempt fails" });
    // the handler was told its span's context (no context manager on Workers)
    expect(handled.map((h) => h.traceparent)).toEqual(processed.map((s) => `00-${TRACE}-${s.spanId}-01`));

    const pushed = present(
      spans.find((s) => s.name === "process traced-hook"),
      "the push subscription's process span",
    );
    expect(pushed.links).toEqual([{ traceId: TRACE, spanId: send.spanId }]);
    const [delivery] = hook.receiver.deliveries;
    expect(delivery?.signatureValid).toBe(true);
    expect(delivery?.headers.traceparent).toBe(`00-${TRACE}-${pushed.spanId}-01`);
    expect(delivery?.headers.tracestate).toBe("rojo=00f067aa0ba902b7");
  });

  it("an invalid traceparent starts a new trace, an oversized tracestate is dropped: the append answers 201", async () => {
    const created = await api("PUT", "/subscriptions/checked-hook", {
      body: { events: ["Checked"], key: "stream", from: "now", deliver: { url: hook.receiver.url, timeoutMs: 5000 } },
    });
    expect(created.status).toBe(201);
    hook.secret = created.json.secret;
    const append = (stream: string, headers: Record<string, string>) =>
      api("POST", `/streams/${stream}/events`, { headers, body: { events: [{ name: "Checked", data: {} }] } });
    const answers = [
      await append("c-zero", { traceparent: `00-${TRACE}-0000000000000000-01`, tracestate: "rojo=1" }),
      await append("c-long", {
        traceparent: `00-${TRACE}-${PARENT}-01`,
        tracestate: `a=${"x".repeat(254)},b=${"x".repeat(254)}`,
      }),
    ];
    expect(answers.map((a) => a.status)).toEqual([201, 201]);
    await eventually(() => {
      expect(hook.receiver.deliveries.filter((d) => d.subscription === "checked-hook")).toHaveLength(2);
      return Promise.resolve();
    });
    const { spans } = await recorded();
    const sendOf = (stream: string) =>
      present(
        spans.find((s) => s.name === "send" && s.attributes["messaging.destination.name"] === stream),
        `${stream}'s send span`,
      );
    const processOf = (stream: string) =>
      present(
        spans.find((s) => s.name === "process checked-hook" && s.attributes["corq.key"] === stream),
        `${stream}'s process span`,
      );
    // the invalid traceparent: a trace of its own, as without one
    expect(sendOf("c-zero").traceId).not.toBe(TRACE);
    expect(sendOf("c-zero").parentSpanId).toBeUndefined();
    expect(sendOf("c-long")).toMatchObject({ traceId: TRACE, parentSpanId: PARENT });
    const sent = Object.fromEntries(
      hook.receiver.deliveries
        .filter((d) => d.subscription === "checked-hook")
        .map((d) => [d.key, [d.headers.traceparent, d.headers.tracestate]]),
    );
    expect(sent).toEqual({
      "c-zero": [`00-${sendOf("c-zero").traceId}-${processOf("c-zero").spanId}-01`, undefined],
      "c-long": [`00-${TRACE}-${processOf("c-long").spanId}-01`, undefined],
    });
  });
});
