// One rule for `ackedThrough`, from a code handler and from a push receiver alike: an integer
// (or an integer string) that is a position of the batch acks through it; anything else under
// `ackedThrough` fails the attempt and acks nothing.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { useCorq } from "./helpers/corq.js";
import { startReceiver } from "./helpers/receiver.js";
import { present } from "./helpers/present.js";

const open = useCorq();
let receiver: Awaited<ReturnType<typeof startReceiver>>;
beforeAll(async () => (receiver = await startReceiver(() => undefined)));
afterAll(() => receiver.close());
beforeEach(() => receiver.reset());

/** Answers to a batch of five events, given their positions: each must fail the attempt. */
const refused: [string, (p: number[]) => unknown][] = [
  ["null", () => null],
  ["a non-numeric string", () => "all"],
  ["a decimal string", (p) => `${p[2]}.0`],
  ["a float", (p) => present(p[2], "a third position") + 0.5],
  ["an object", (p) => ({ position: p[2] })],
  ["an array", (p) => [p[2]]],
  ["a boolean", () => true],
  ["a position not in the batch", (p) => present(p[4], "a fifth position") + 1000],
  ["a position string not in the batch", (p) => String(present(p[4], "a fifth position") + 1000)],
];
/** Answers that ack through the second event (the rest comes next); the last single event is acked whole. */
const accepted: [string, (p: number[]) => unknown][] = [
  ["a number", (p) => p[1]],
  ["an integer string", (p) => (p[1] === undefined ? undefined : String(p[1]))],
];
// a failed key waits out its backoff: every key is claimed once with its first batch of five
const settings = { maxAttempts: 100, backoff: { initialMs: 60_000, maxMs: 60_000, factor: 1 } };

describe.each(["code", "push"] as const)("ackedThrough from a %s subscription", (kind) => {
  it("acks a prefix for a position (number or integer string) and fails on anything else", async () => {
    const answers = new Map([...refused, ...accepted].map(([label, answer], i) => [`k${i}`, { label, answer }]));
    const answer = (key: string, events: { position: number }[]) => ({
      ackedThrough: answers.get(key)!.answer(events.map((e) => e.position)),
    });
    const handle = (events: { position: number }[], ctx: { key: string }) =>
      answer(ctx.key, events) as { ackedThrough: number };
    // the receiver listens on 127.0.0.1: private destinations allowed, explicitly
    const { corq } = await open(
      kind === "code" ? { subscriptions: [{ name: "s", ...settings, handle }] } : { pushAllowPrivate: true },
    );
    if (kind === "push") {
      await corq.putSubscription("s", { ...settings, deliver: { url: receiver.url, timeoutMs: 2000 } });
      receiver.behave((d) => ({ raw: JSON.stringify(answer(d.key, d.events)) }));
    }
    for (const key of answers.keys())
      await corq.append(
        key,
        Array.from({ length: 5 }, () => ({ name: "E", data: {} })),
      );
    await corq.advance();

    const results = new Map<string, unknown[]>();
    for (;;) {
      const result = await corq.consume("s");
      if (result === null) break;
      results.set(result.key, [
        ...(results.get(result.key) ?? []),
        { outcome: result.outcome, events: result.events, error: result.error },
      ]);
    }
    const states = new Map((await corq.keys("s")).map((k) => [k.key, k]));
    for (const [key, { label }] of answers) {
      if (refused.some(([l]) => l === label)) {
        expect(results.get(key), label).toEqual([
          {
            outcome: "retry",
            events: 5,
            error: expect.stringMatching(/^Error: ackedThrough .* is not a position of this batch$/),
          },
        ]);
        expect(states.get(key), label).toMatchObject({ status: "backoff", pending: 5 });
      } else {
        expect(results.get(key), label).toEqual(
          [5, 3, 1].map((events) => ({ outcome: "acked", events, error: undefined })),
        );
        expect(states.get(key)?.pending ?? 0, label).toBe(0);
      }
    }
    // a receiver's text does not reach lastError
    expect(states.get("k1")?.lastError).toBe("Error: ackedThrough (a string) is not a position of this batch");
  });
});
