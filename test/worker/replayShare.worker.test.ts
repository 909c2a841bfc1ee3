// CORQ_REPLAY_KEYS through the real Worker: a consumer holds at most that many replaying keys at
// once — and that many, not the default quarter of CORQ_KEYS_PER_CLAIM (1 of 4 here).
import { describe, expect, it } from "vitest";
import { peakInFlight, useReceiver } from "../helpers/receiver.js";
import { eventually, useStack } from "../helpers/stack.js";

const REPLAY_KEYS = 3;
const { api } = useStack({
  vars: {
    CORQ_CONCURRENCY: "1", // one consumer: what is in flight is one drain's keys
    CORQ_KEYS_PER_CLAIM: "4",
    CORQ_REPLAY_KEYS: String(REPLAY_KEYS),
    CORQ_PUSH_ALLOW_PRIVATE: "true",
  },
});
const hook = useReceiver();

describe("CORQ_REPLAY_KEYS", () => {
  it("a consumer delivers CORQ_REPLAY_KEYS replaying keys at once, never more", async () => {
    const created = await api("PUT", "/subscriptions/rooms", {
      body: { events: ["Arrived"], batchSize: 1, deliver: { url: hook.receiver.url } },
    });
    hook.secret = created.json.secret;
    for (let i = 0; i < 6; i++)
      expect(
        (await api("POST", `/streams/room-${i}/events`, { body: { events: [{ name: "Arrived", data: { i } }] } }))
          .status,
      ).toBe(201);
    await eventually(async () => expect(hook.receiver.deliveries).toHaveLength(6), { timeoutMs: 20_000 });
    hook.receiver.behave(() => ({ delayMs: 300 })); // slow: the keys one claim took overlap
    expect(await api("POST", "/subscriptions/rooms/rewind", { body: { to: "beginning" } })).toMatchObject({
      status: 200,
      json: { requeued: 6 },
    });
    await eventually(async () => expect(hook.receiver.deliveries).toHaveLength(12), { timeoutMs: 20_000 });
    const replayed = hook.receiver.deliveries.slice(6);
    expect(replayed.every((d) => d.events.every((e) => e.replay))).toBe(true);
    expect(peakInFlight(replayed)).toBe(REPLAY_KEYS);
  });
});
