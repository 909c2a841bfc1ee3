// Trace context without an OpenTelemetry SDK (docs/operations.md, "Traces"): the stock Worker
// in workerd (and, in the "serve" project, `npm run serve`) registers no tracer, yet an append
// request's valid traceparent / tracestate reach the push receiver as given; invalid or
// oversized ones are dropped and the append still answers 201. test/tracing.int.test.ts covers
// the library; tracing.worker.test.ts the Worker with the SDK.
import { describe, expect, it } from "vitest";
import { useReceiver } from "../helpers/receiver.js";
import { eventually, useStack } from "../helpers/stack.js";

// the receiver listens on 127.0.0.1: private destinations allowed, explicitly
const { api } = useStack({ vars: { CORQ_PUSH_ALLOW_PRIVATE: "true" } });
const hook = useReceiver();

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const TRACEPARENT = `00-${TRACE}-00f067aa0ba902b7-01`;

describe("trace context without an SDK", () => {
  it("an append's traceparent and tracestate reach the push receiver as given; invalid or oversized ones are dropped, 201", async () => {
    const created = await api("PUT", "/subscriptions/passed-on", {
      body: { events: ["Traced"], key: "stream", from: "now", deliver: { url: hook.receiver.url, timeoutMs: 5000 } },
    });
    expect(created.status).toBe(201);
    hook.secret = created.json.secret;
    const append = (stream: string, headers: Record<string, string>) =>
      api("POST", `/streams/${stream}/events`, { headers, body: { events: [{ name: "Traced", data: {} }] } });
    const answers = [
      await append("t-valid", { traceparent: TRACEPARENT, tracestate: "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE" }),
      // all-zero parent id
      await append("t-invalid", { traceparent: `00-${TRACE}-0000000000000000-01`, tracestate: "rojo=1" }),
      // upper-case hex
      await append("t-upper", { traceparent: TRACEPARENT.toUpperCase() }),
      // a tracestate of 513 characters: the traceparent kept, the tracestate dropped
      await append("t-long-state", {
        traceparent: TRACEPARENT,
        tracestate: `a=${"x".repeat(254)},b=${"x".repeat(254)}`,
      }),
      await append("t-none", {}),
    ];
    expect(answers.map((a) => a.status)).toEqual([201, 201, 201, 201, 201]);

    await eventually(() => {
      expect(new Set(hook.receiver.deliveries.map((d) => d.key)).size).toBe(5);
      return Promise.resolve();
    });
    const sent = Object.fromEntries(
      hook.receiver.deliveries.map((d) => [d.key, [d.headers.traceparent, d.headers.tracestate]]),
    );
    expect(sent).toEqual({
      "t-valid": [TRACEPARENT, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"],
      "t-invalid": [undefined, undefined],
      "t-upper": [undefined, undefined],
      "t-long-state": [TRACEPARENT, undefined],
      "t-none": [undefined, undefined],
    });
    expect(hook.receiver.deliveries.every((d) => d.signatureValid)).toBe(true);
  });
});
