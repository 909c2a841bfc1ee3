// Through the real Worker: push deliveries carry seq, replay and the incarnation; a rewind over
// HTTP delivers again with new seqs (and new webhook ids) without waiting for the cron; one key
// is paused and resumed by a percent-encoded path; the dashboard does both with a form.
import { describe, expect, it } from "vitest";
import { createCorq } from "../../src/index.js";
import { useReceiver } from "../helpers/receiver.js";
import { postForm, sessionCookie } from "../helpers/dashboardForm.js";
import { present } from "../helpers/present.js";
import { eventually, useStack } from "../helpers/stack.js";

const { state, api } = useStack({ vars: { CORQ_PUSH_ALLOW_PRIVATE: "true" } });
const hook = useReceiver();

let visitors = 0;
const append = async (room: string, n: number) =>
  (
    await api("POST", `/streams/visitor-${++visitors}/events`, {
      body: { events: Array.from({ length: n }, (_, i) => ({ name: "Arrived", data: { room, i } })) },
    })
  ).json.positions as number[];

/** Per key, [position, seq, replay] of every event delivered, in delivery order. */
const delivered = (key: string) =>
  hook.receiver.deliveries
    .filter((d) => d.key === key)
    .flatMap((d) => d.events.map((e) => [e.position, e.seq, e.replay] as [number, number, boolean]));

describe("seq, replay and rewind over HTTP", () => {
  it("delivers seq and the incarnation; a rewind delivers again with new seqs, replay and new webhook ids", async () => {
    const created = await api("PUT", "/subscriptions/rooms", {
      body: { events: ["Arrived"], key: "data.room", deliver: { url: hook.receiver.url }, batchSize: 2 },
    });
    expect(created.status).toBe(201);
    hook.secret = created.json.secret;
    const incarnation = created.json.incarnation;
    expect(incarnation).toMatch(/^[0-9a-f-]{36}$/);
    const lobby = await append("lobby", 3);
    await eventually(async () => expect(delivered("lobby")).toHaveLength(3));
    expect(delivered("lobby")).toEqual(lobby.map((p, i) => [p, i + 1, false]));
    expect(hook.receiver.deliveries.every((d) => d.incarnation === incarnation && d.signatureValid)).toBe(true);
    const firstIds = new Set(hook.receiver.deliveries.map((d) => d.id));

    const rewound = await api("POST", "/subscriptions/rooms/rewind", { body: { to: lobby[1] } });
    expect(rewound).toMatchObject({ status: 200, json: { requeued: 2 } });
    // delivered by the dispatch the rewind started, not by the cron (1 s locally): within seconds
    await eventually(async () => expect(delivered("lobby")).toHaveLength(5));
    expect(delivered("lobby").slice(3)).toEqual([
      [lobby[1], 4, true],
      [lobby[2], 5, true],
    ]);
    // the same batches as the first time (batchSize 2: lobby 0–1, then 2), replayed: new ids
    expect(await api("POST", "/subscriptions/rooms/rewind", { body: { to: lobby[0], key: "lobby" } })).toMatchObject({
      status: 200,
      json: { requeued: 3 },
    });
    await eventually(async () => expect(delivered("lobby")).toHaveLength(8));
    expect(delivered("lobby").slice(5)).toEqual(lobby.map((p, i) => [p, 6 + i, true]));
    const replayIds = hook.receiver.deliveries.filter((d) => d.events.every((e) => e.replay)).map((d) => d.id);
    expect(replayIds.length).toBeGreaterThanOrEqual(3);
    expect(replayIds.filter((id) => firstIds.has(id))).toEqual([]);

    await eventually(async () => {
      // (the delivery is answered before its ack commits)
      const keys = await api("GET", "/subscriptions/rooms/keys");
      expect(keys.json.keys).toMatchObject([{ key: "lobby", seq: 8, status: "idle", reason: "idle: nothing queued" }]);
    });
  });

  it("refuses a bad rewind with problem+json and changes nothing", async () => {
    const before = await api("GET", "/subscriptions/rooms/keys");
    for (const [path, body, status] of [
      ["/subscriptions/rooms/rewind", { to: "start" }, 400],
      ["/subscriptions/rooms/rewind", { to: 0 }, 400],
      ["/subscriptions/rooms/rewind", { to: 999_999 }, 400],
      ["/subscriptions/rooms/rewind", { to: "beginning", key: "" }, 400],
      ["/subscriptions/rooms/rewind", {}, 400],
      ["/subscriptions/missing/rewind", { to: "beginning" }, 404],
    ] as const) {
      const refused = await api("POST", path, { body });
      expect(refused.status, JSON.stringify(body)).toBe(status);
      expect(refused.type).toContain("application/problem+json");
    }
    expect((await api("POST", "/subscriptions/rooms/rewind", { body: { to: "beginning" }, token: null })).status).toBe(
      401,
    );
    expect(await api("GET", "/subscriptions/rooms/keys")).toEqual(before);
  });

  it("pauses and resumes one key by its percent-encoded name; the others flow", async () => {
    const key = "floor 2/room #7";
    const path = `/subscriptions/rooms/keys/${encodeURIComponent(key)}`;
    const paused = await api("POST", `${path}/pause`);
    expect(paused).toMatchObject({ status: 200, json: { key, status: "paused" } });
    const positions = await append(key, 2);
    await append("hall", 1);
    await eventually(async () => expect(delivered("hall")).toHaveLength(1));
    expect(delivered(key)).toEqual([]);
    expect((await api("GET", "/subscriptions/rooms/keys?status=paused")).json.keys).toMatchObject([
      { key, status: "paused", pending: 2, reason: expect.stringMatching(/^paused since .*; 2 events wait$/) },
    ]);
    expect((await api("GET", "/subscriptions/rooms")).json.keys).toMatchObject({ paused: 1 });

    const resumed = await api("POST", `${path}/resume`);
    expect(resumed).toMatchObject({ status: 200, json: { key } });
    // not paused (ready, or already claimed — even done — by a consumer the local cron started)
    expect(resumed.json.status).not.toBe("paused");
    expect(resumed.json).not.toHaveProperty("pausedSince");
    await eventually(async () => expect(delivered(key)).toEqual(positions.map((p, i) => [p, i + 1, false])));

    expect((await api("POST", "/subscriptions/missing/keys/a/pause")).status).toBe(404);
    expect((await api("POST", "/subscriptions/rooms/keys/nobody/resume")).status).toBe(404);
    // (a key "." or ".." cannot even be sent: URL parsers fold %2E%2E into the path)
    for (const bad of ["a%00b", "x".repeat(513), "%ED%A0%80"]) {
      const refused = await api("POST", `/subscriptions/rooms/keys/${bad}/pause`);
      expect(refused.status, bad.slice(0, 10)).toBe(400);
      expect(refused.type).toContain("application/problem+json");
    }
    expect((await api("GET", "/subscriptions/rooms")).json.paused).toBe(false);
    expect((await api("POST", `${path}/pause`, { token: "wrong" })).status).toBe(401);
    expect((await api("GET", `/subscriptions/rooms/keys?status=paused`)).json.keys).toEqual([]);
  });

  it("shows who holds a key: the Worker invocation, since when", async () => {
    hook.receiver.behave((d) => (d.key === "slow" ? { delayMs: 3000 } : undefined));
    try {
      await append("slow", 1);
      const held = await eventually(async () => {
        const { json } = await api("GET", "/subscriptions/rooms/keys?status=leased");
        expect(json.keys).toHaveLength(1);
        return json.keys[0];
      });
      expect(held).toMatchObject({ key: "slow", holder: expect.stringMatching(/^worker invocation [0-9a-f]{8}$/) });
      expect(held.reason).toBe(`leased by ${held.holder} since ${held.leasedSince} (until ${held.leasedUntil})`);
    } finally {
      hook.receiver.behave(() => undefined);
    }
  });

  it("a deleted and re-created subscription has a new incarnation and numbers from 1 again", async () => {
    const before = (await api("GET", "/subscriptions/rooms")).json.incarnation;
    expect((await api("DELETE", "/subscriptions/rooms")).status).toBe(204);
    const again = await api("PUT", "/subscriptions/rooms", {
      body: { events: ["Arrived"], key: "data.room", from: "now", deliver: { url: hook.receiver.url } },
    });
    hook.secret = again.json.secret;
    expect(again.json.incarnation).not.toBe(before);
    hook.receiver.reset();
    const positions = await append("lobby", 1);
    await eventually(async () => expect(delivered("lobby")).toEqual([[positions[0], 1, false]]));
    expect(present(hook.receiver.deliveries[0], "the first delivery").incarnation).toBe(again.json.incarnation);
  });
});

describe("the dashboard's key actions", () => {
  const post = (path: string, fields: Record<string, string>, cookie?: string) =>
    postForm(state.stack.url, path, fields, { cookie });

  it("pause a key, resume it, and rewind, from forms; the page shows holder and why", async () => {
    const login = await post("/login", { token: state.stack.adminToken });
    const cookie = sessionCookie(login);
    const back = "/ui/subscriptions/rooms";
    const paused = await post("/ui/actions/pause-key", { subscription: "rooms", key: "lobby", back }, cookie);
    expect(paused.status).toBe(303);
    expect(paused.headers.get("location")).toBe(`${back}?done=pause-key&count=0&of=rooms`);
    expect((await api("GET", "/subscriptions/rooms/keys?status=paused")).json.keys).toMatchObject([{ key: "lobby" }]);

    const page = await (
      await fetch(`${state.stack.url}${back}?done=pause-key&count=0&of=rooms`, { headers: { cookie } })
    ).text();
    expect(page).toContain("A key of rooms paused.");
    expect(page).toContain('aria-label="Resume key lobby"');
    expect(page).toContain('aria-label="Rewind rooms"');
    // (the time kept whole: a narrow cell wraps around it, not inside it)
    expect(page).toMatch(/<td class="wrap why" data-label="Why">paused since <span class="nb">[^<]+Z<\/span><\/td>/);

    expect((await post("/ui/actions/resume-key", { subscription: "rooms", key: "lobby", back }, cookie)).status).toBe(
      303,
    );
    const rewound = await post(
      "/ui/actions/rewind",
      { subscription: "rooms", key: "lobby", to: "beginning", back },
      cookie,
    );
    expect(rewound.status).toBe(303);
    // the log's beginning, also for a subscription created `from: "now"`: the three lobby events
    // of its first incarnation and the one since
    expect(rewound.headers.get("location")).toBe(`${back}?done=rewind&count=4&of=rooms`);
    const refused = await post("/ui/actions/rewind", { subscription: "rooms", to: "soon", back }, cookie);
    expect(refused.status).toBe(400);
    expect((await post("/ui/actions/rewind", { subscription: "rooms", to: "beginning", back })).status).toBe(401);
  });

  it("resuming the whole subscription from the dashboard delivers what waited at once (no cron)", async () => {
    const login = await post("/login", { token: state.stack.adminToken });
    const cookie = sessionCookie(login);
    const back = "/ui/subscriptions/rooms";
    // the consumers the tests above started have delivered everything and ended (else one that
    // looks for ready keys once more after the resume below would deliver what this test awaits)
    await eventually(async () => {
      const { keys } = (await api("GET", "/subscriptions/rooms/keys")).json;
      expect(keys.filter((k: { pending: number; status: string }) => k.pending > 0 || k.status === "leased")).toEqual(
        [],
      );
    });
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect((await post("/ui/actions/pause", { subscription: "rooms", back }, cookie)).status).toBe(303);
    // appended behind the API's back: an append over HTTP kicks a dispatch of its own, which could
    // still be at work when the subscription is resumed
    const corq = createCorq({ databaseUrl: state.stack.databaseUrl });
    const { positions } = await corq
      .append(
        "visitor-quiet",
        [0, 1].map((i) => ({ name: "Arrived", data: { room: "hall-2", i } })),
      )
      .finally(() => corq.close());
    await api("POST", "/advance");
    expect((await api("GET", "/subscriptions/rooms/keys")).json.keys).toContainEqual(
      expect.objectContaining({ key: "hall-2", pending: 2 }),
    );
    // consumers still at work from before the pause have looked for ready keys a last time and ended
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect(delivered("hall-2")).toEqual([]);
    expect((await post("/ui/actions/resume", { subscription: "rooms", back }, cookie)).status).toBe(303);
    await eventually(async () => expect(delivered("hall-2")).toEqual(positions.map((p, i) => [p, i + 1, false])));
  });
});
