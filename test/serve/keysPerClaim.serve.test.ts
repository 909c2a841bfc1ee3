// serve's consumers take CORQ_KEYS_PER_CLAIM (default 16 on Node, the library's) and
// CORQ_CONCURRENCY: one consumer claiming 2 keys at a time runs at most 2 handlers at once.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCorq, type Corq } from "../../src/index.js";
import { nodeSettings } from "../../src/node/serve.js";
import { useRecordingServe } from "../helpers/serveProcess.js";
import { eventually } from "../helpers/stack.js";

const state = useRecordingServe({ CORQ_CONCURRENCY: "1", CORQ_KEYS_PER_CLAIM: "2", CORQ_TEST_HANDLER_MS: "300" });
let corq: Corq;

beforeAll(() => {
  corq = createCorq({ databaseUrl: state.url, notify: true });
});

afterAll(async () => {
  await corq?.close();
});

describe("serve: keys per claim", () => {
  it("the knobs: CORQ_KEYS_PER_CLAIM 16 unless set, CORQ_REPLAY_KEYS a quarter of it unless set", () => {
    expect(nodeSettings({})).toMatchObject({ keysPerClaim: 16, replayKeys: 4 });
    expect(nodeSettings({ CORQ_KEYS_PER_CLAIM: "8" })).toMatchObject({ keysPerClaim: 8, replayKeys: 2 });
    expect(nodeSettings({ CORQ_KEYS_PER_CLAIM: "8", CORQ_REPLAY_KEYS: "3" })).toMatchObject({ replayKeys: 3 });
    // malformed or out of range: Node's default, not the Worker's 4
    for (const bad of ["abc", "", "0", "999"])
      expect(nodeSettings({ CORQ_KEYS_PER_CLAIM: bad })).toMatchObject({ keysPerClaim: 16, replayKeys: 4 });
  });

  it("one consumer with 2 keys per claim runs 2 handlers at once, never more", async () => {
    for (let i = 0; i < 6; i++) await corq.append(`k${i}`, [{ name: "E", data: {} }]);
    await eventually(
      async () => expect((await state.raw.query("SELECT count(*)::int AS n FROM serve_handled")).rows[0].n).toBe(6),
      { timeoutMs: 15_000 },
    );
    // the most handlers running at any one start
    const { rows } = await state.raw.query(`
      SELECT max((SELECT count(*) FROM serve_handled o
                  WHERE o.started_at <= h.started_at AND o.finished_at > h.started_at))::int AS most
      FROM serve_handled h`);
    expect(rows[0].most).toBe(2);
  });
});
