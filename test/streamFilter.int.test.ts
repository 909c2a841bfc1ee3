// The stream filter (`streams`: stream-name prefixes) of code subscriptions, on real Postgres:
// every key strategy (stream, JSON path, function) takes only the events of its prefixes, by
// exact prefix (no LIKE wildcards), counts the others as it counts events of other names
// (not at all: only its watermark moves past them), shows the filter in its stats, and
// applies a changed filter from the current watermark.
import { describe, expect, it } from "vitest";
import type { DeliveredEvent, HandlerContext, StoredEvent, SubscriptionDefinition } from "../src/index.js";
import { drain, useCorq } from "./helpers/corq.js";

const open = useCorq();

/** A subscription that records `<key> <stream>` of every event it handles. */
function recording(definition: Omit<SubscriptionDefinition, "handle">, into: Map<string, string[]>) {
  const seen: string[] = [];
  into.set(definition.name, seen);
  return {
    ...definition,
    handle: (events: DeliveredEvent[], ctx: HandlerContext) =>
      void seen.push(...events.map((e) => `${ctx.key} ${e.stream}`)),
  };
}

const event = (name: string, roomId: string) => ({ name, data: { roomId, k: `k-${roomId}` } });
// streams of every kind: inside a prefix, just outside it, and where LIKE's `_` would match
const streams = ["orders-1", "orders-eu-2", "invoices-3", "order-4", "visitor-a", "visitorb", "team_a-5", "teamXa-6"];

describe("a stream filter on code subscriptions", () => {
  it("takes only the events of streams with one of its prefixes, with every key strategy; the others are not counted as skipped", async () => {
    const seen = new Map<string, string[]>();
    const { corq } = await open({
      subscriptions: [
        recording({ name: "billing", streams: ["orders-", "invoices-"] }, seen),
        recording({ name: "rooms", events: ["Arrived"], key: "data.roomId", streams: ["visitor-", "team_a-"] }, seen),
        recording(
          {
            name: "by-function",
            key: (e: StoredEvent) => (e.data as { k: string }).k,
            streams: ["orders-eu-", "visitor-", "teamXa-"],
          },
          seen,
        ),
        recording({ name: "everything" }, seen),
      ],
    });
    for (const [i, stream] of streams.entries()) {
      await corq.append(stream, [event("Arrived", `r${i}`), event("Departed", `r${i}`)]);
    }
    expect(await corq.advance()).toEqual({ billing: 6, rooms: 2, "by-function": 6, everything: 16 });
    for (const name of seen.keys()) await drain(corq, name);

    expect(seen.get("billing")?.sort()).toEqual(
      ["orders-1", "orders-1", "orders-eu-2", "orders-eu-2", "invoices-3", "invoices-3"].map((s) => `${s} ${s}`).sort(),
    );
    expect(seen.get("rooms")?.sort()).toEqual(["r4 visitor-a", "r6 team_a-5"]);
    expect(seen.get("by-function")?.sort()).toEqual([
      "k-r1 orders-eu-2",
      "k-r1 orders-eu-2",
      "k-r4 visitor-a",
      "k-r4 visitor-a",
      "k-r7 teamXa-6",
      "k-r7 teamXa-6",
    ]);
    expect(seen.get("everything")).toHaveLength(16);

    // shown with the subscription; events of other streams are passed over like events of other
    // names: the watermark moves past them, nothing is skipped, nothing lags
    expect(await corq.subscription("billing")).toMatchObject({ streams: ["orders-", "invoices-"], skipped: 0, lag: 0 });
    expect(await corq.subscription("rooms")).toMatchObject({ streams: ["visitor-", "team_a-"], skipped: 0, lag: 0 });
    expect(await corq.subscription("by-function")).toMatchObject({
      streams: ["orders-eu-", "visitor-", "teamXa-"],
      skipped: 0,
      lag: 0,
    });
    expect(await corq.subscription("everything")).toMatchObject({ streams: null, skipped: 0, lag: 0 });
    expect((await corq.stats()).subscriptions.map((s) => [s.name, s.streams])).toEqual([
      ["billing", ["orders-", "invoices-"]],
      ["by-function", ["orders-eu-", "visitor-", "teamXa-"]],
      ["everything", null],
      ["rooms", ["visitor-", "team_a-"]],
    ]);
  });

  it("never runs a key function on an event of another stream", async () => {
    const asked: string[] = [];
    const { corq } = await open({
      subscriptions: [
        {
          name: "fn",
          streams: ["a-", "b-"],
          key: (e: StoredEvent) => {
            asked.push(e.stream);
            return e.stream;
          },
          handle: () => undefined,
        },
      ],
    });
    for (const stream of ["a-1", "c-2", "b-3", "ab-4"]) await corq.append(stream, [event("E", "x")]);
    expect(await corq.advance()).toEqual({ fn: 2 });
    expect(asked).toEqual(["a-1", "b-3"]);
  });

  it("a rewind queues again only the events of its streams, with a SQL key and with a key function", async () => {
    const seen = new Map<string, string[]>();
    const { corq } = await open({
      subscriptions: [
        recording({ name: "by-stream", streams: ["a-", "b-"] }, seen),
        recording({ name: "by-function", key: (e: StoredEvent) => `k:${e.stream}`, streams: ["a-", "c-"] }, seen),
      ],
    });
    for (const stream of ["a-1", "b-1", "c-1", "d-1"]) await corq.append(stream, [event("E", "x")]);
    expect(await corq.advance()).toEqual({ "by-stream": 2, "by-function": 2 });
    for (const name of seen.keys()) await drain(corq, name);
    expect(await corq.rewind("by-stream", { to: "beginning" })).toEqual({ requeued: 2 });
    expect(await corq.rewind("by-function", { to: "beginning" })).toEqual({ requeued: 2 });
    for (const name of seen.keys()) await drain(corq, name);
    expect(seen.get("by-stream")?.sort()).toEqual(["a-1 a-1", "a-1 a-1", "b-1 b-1", "b-1 b-1"]);
    expect(seen.get("by-function")?.sort()).toEqual(["k:a-1 a-1", "k:a-1 a-1", "k:c-1 c-1", "k:c-1 c-1"]);
  });

  it("leaves an unchanged subscription row unwritten: registering the same filter again writes nothing", async () => {
    // a write would also wait for the row lock of an advance at work on that subscription
    const { corq, raw } = await open({
      subscriptions: [
        { name: "filtered", streams: ["a-", "b-"], handle: () => undefined },
        { name: "unfiltered", handle: () => undefined },
      ],
    });
    await corq.advance();
    await corq.append("a-1", [event("E", "x")]);
    await corq.advance(); // registers the same definitions again
    const { rows } = await raw.query(
      "SELECT name, updated_at = created_at AS untouched FROM corq.subscriptions ORDER BY name",
    );
    expect(rows).toEqual([
      { name: "filtered", untouched: true },
      { name: "unfiltered", untouched: true },
    ]);
  });

  it("applies a changed filter from the current watermark, and no filter again takes every stream", async () => {
    const seen = new Map<string, string[]>();
    const { corq, another } = await open({ subscriptions: [recording({ name: "s", streams: ["a-", "b-"] }, seen)] });
    for (const stream of ["a-1", "b-1", "c-1"]) await corq.append(stream, [event("E", "x")]);
    expect(await corq.advance()).toEqual({ s: 2 });

    // a deploy changes the filter: the events already past the watermark stay as they were
    const changed = another({ subscriptions: [recording({ name: "s", streams: ["c-", "d-"] }, seen)] });
    for (const stream of ["a-2", "c-2", "d-2"]) await changed.append(stream, [event("E", "x")]);
    expect(await changed.advance()).toEqual({ s: 2 });
    expect(await changed.subscription("s")).toMatchObject({ streams: ["c-", "d-"], pending: 4 });

    const unfiltered = another({ subscriptions: [recording({ name: "s" }, seen)] });
    for (const stream of ["a-3", "e-3"]) await unfiltered.append(stream, [event("E", "x")]);
    expect(await unfiltered.advance()).toEqual({ s: 2 });
    expect(await unfiltered.subscription("s")).toMatchObject({ streams: null, pending: 6 });
    await drain(unfiltered, "s");
    expect(
      seen
        .get("s")
        ?.map((line) => line.split(" ")[1])
        .sort(),
    ).toEqual(["a-1", "a-3", "b-1", "c-2", "d-2", "e-3"]);
  });
});
