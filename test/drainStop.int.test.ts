// The graceful stop of a drain (Corq.drain's `stop` and `abort`): after `stop` nothing more is
// claimed and the batch in hand finishes as usual; after `abort` the handler's signal fires, and
// a handler that gives up has its lease released at once — the key ready again, no attempt
// counted — while a handler that finishes anyway is acked.
import { describe, expect, it } from "vitest";
import type { Handler } from "../src/index.js";
import { useCorq } from "./helpers/corq.js";

const open = useCorq();
// one key per claim, so "the batch in hand" is one batch; several at once: the last test
const one = { keysPerClaim: 1 };

/** A handler that waits for the test's go (or for its signal), recording what it saw. */
function gated(onAbort: "throw" | "finish") {
  const handled: string[] = [];
  const state = { open: false }; // open: handlers finish at once
  let release: () => void = () => undefined;
  let started: () => void = () => undefined;
  const startedOnce = new Promise<void>((resolve) => (started = resolve));
  const handle: Handler = async (events, ctx) => {
    handled.push(ctx.key);
    started();
    if (state.open) return undefined;
    await new Promise<void>((resolve, reject) => {
      release = resolve;
      ctx.signal.addEventListener("abort", () => (onAbort === "throw" ? reject(ctx.signal.reason) : resolve()));
    });
    return undefined;
  };
  return { handle, handled, state, started: startedOnce, finish: () => release() };
}

const keyRow = (raw: import("pg").Pool, key: string) =>
  raw
    .query(
      `SELECT lease_token, attempts, available_at <= now() AS ready, pending FROM corq.keys
       WHERE key = $1 AND subscription_id = (SELECT id FROM corq.subscriptions WHERE name = 'stoppable')`,
      [key],
    )
    .then((r) => r.rows[0]);

describe("drain stop and abort", () => {
  it("stop: the batch in hand is acked, nothing more is claimed", async () => {
    const gate = gated("throw");
    const { corq, raw } = await open({ subscriptions: [{ name: "stoppable", handle: gate.handle }] });
    for (const key of ["a", "b", "c"]) await corq.append(key, [{ name: "E", data: {} }]);
    await corq.advance();
    const stop = new AbortController();
    const draining = corq.drain("stoppable", { ...one, stop: stop.signal });
    await gate.started;
    stop.abort();
    gate.finish();
    const result = await draining;
    expect(result).toMatchObject({ batches: 1, first: { key: "a", outcome: "acked" } });
    expect(gate.handled).toEqual(["a"]);
    expect(await keyRow(raw, "a")).toMatchObject({ lease_token: null, pending: 0 });
    for (const key of ["b", "c"]) expect(await keyRow(raw, key)).toMatchObject({ lease_token: null, ready: true });
    // an already stopped drain claims nothing at all
    expect(await corq.drain("stoppable", { stop: stop.signal })).toMatchObject({ batches: 0, first: null });
  });

  it("abort: a handler that gives up has its lease released (ready now, no attempt counted)", async () => {
    const gate = gated("throw");
    const { corq, raw } = await open({
      subscriptions: [{ name: "stoppable", leaseMs: 60_000, handle: gate.handle }],
    });
    for (const key of ["a", "b"]) await corq.append(key, [{ name: "E", data: {} }]);
    await corq.advance();
    const stop = new AbortController();
    const abort = new AbortController();
    const draining = corq.drain("stoppable", { ...one, stop: stop.signal, abort: abort.signal });
    await gate.started;
    expect(await keyRow(raw, "a")).toMatchObject({ lease_token: expect.any(String), ready: false });
    stop.abort();
    abort.abort();
    const result = await draining;
    expect(result).toMatchObject({ batches: 1, first: { key: "a", outcome: "released" } });
    expect(await keyRow(raw, "a")).toMatchObject({ lease_token: null, attempts: 0, ready: true, pending: 1 });
    expect(await keyRow(raw, "b")).toMatchObject({ lease_token: null, ready: true });
    // the next consumer gets it at once, not after the 60 s lease
    gate.state.open = true;
    expect(await corq.drain("stoppable", one)).toMatchObject({ batches: 2 });
    expect(gate.handled.sort()).toEqual(["a", "a", "b"]);
  });

  it("abort: a handler that finishes anyway is acked", async () => {
    const gate = gated("finish");
    const { corq, raw } = await open({ subscriptions: [{ name: "stoppable", handle: gate.handle }] });
    await corq.append("a", [{ name: "E", data: {} }]);
    await corq.advance();
    const abort = new AbortController();
    const draining = corq.drain("stoppable", { abort: abort.signal });
    await gate.started;
    abort.abort();
    expect(await draining).toMatchObject({ batches: 1, first: { key: "a", outcome: "acked" } });
    expect(await keyRow(raw, "a")).toMatchObject({ lease_token: null, pending: 0, attempts: 0 });
  });

  it("stop and abort with several keys in hand: each handler that gives up has its own lease released", async () => {
    const gate = gated("throw");
    const { corq, raw } = await open({
      subscriptions: [{ name: "stoppable", leaseMs: 60_000, handle: gate.handle }],
    });
    for (const key of ["a", "b", "c", "d"]) await corq.append(key, [{ name: "E", data: {} }]);
    await corq.advance();
    const stop = new AbortController();
    const abort = new AbortController();
    const draining = corq.drain("stoppable", { keysPerClaim: 3, stop: stop.signal, abort: abort.signal });
    await gate.started;
    while (gate.handled.length < 3) await new Promise((resolve) => setTimeout(resolve, 10));
    stop.abort();
    abort.abort();
    const result = await draining;
    expect(result.batches).toBe(3);
    expect(gate.handled.sort()).toEqual(["a", "b", "c"]);
    for (const key of ["a", "b", "c", "d"])
      expect(await keyRow(raw, key), key).toMatchObject({ lease_token: null, attempts: 0, ready: true, pending: 1 });
  });
});
