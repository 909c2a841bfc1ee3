// The wake-up object (functions/wakeUps.ts) on a stand-in of its Durable Object storage: one
// alarm, moved earlier and never later; its alarm dispatches through SELF under the path it was
// given, with the admin token and corq-wake-up; an answer that is not 2xx throws (the platform
// retries the alarm). The whole path, in workerd: test/worker/wakeUps.worker.test.ts.
import { describe, expect, it } from "vitest";
import { CorqWakeUps } from "../functions/wakeUps.js";
import { WAKE_AT_URL, WAKE_UP_HEADER } from "../src/http/wakeUps.js";

function objectWith(answer = 202) {
  const stored = new Map<string, unknown>();
  const storage = {
    alarm: null as number | null,
    writes: 0,
    async getAlarm() {
      return this.alarm;
    },
    async setAlarm(at: number) {
      this.writes++;
      this.alarm = at;
    },
    async get<T>(key: string) {
      return stored.get(key) as T | undefined;
    },
    async put<T>(key: string, value: T) {
      this.writes++;
      stored.set(key, value);
    },
  };
  const sent: Request[] = [];
  const SELF = {
    async fetch(request: Request | string) {
      sent.push(request as Request);
      return new Response(null, { status: answer });
    },
  };
  const object = new CorqWakeUps({ storage }, { SELF, CORQ_ADMIN_TOKEN: "admin-token" });
  const wakeAt = async (at: number, path = "/dispatch") =>
    (await object.fetch(new Request(WAKE_AT_URL, { method: "POST", body: JSON.stringify({ at, path }) }))).json();
  return { object, storage, sent, wakeAt };
}

describe("CorqWakeUps", () => {
  it("holds one alarm at the earliest time asked for: earlier moves it, later does not", async () => {
    const { storage, wakeAt } = objectWith();
    expect(await wakeAt(5000)).toEqual({ alarmAt: 5000, set: true });
    expect(await wakeAt(9000)).toEqual({ alarmAt: 5000, set: false });
    expect(storage.alarm).toBe(5000);
    expect(await wakeAt(3000)).toEqual({ alarmAt: 3000, set: true });
    expect(storage.alarm).toBe(3000);
    // the path is written once, not at every request
    expect(storage.writes).toBe(3);
  });

  it("its alarm dispatches through SELF at the app's path, with the admin token and corq-wake-up", async () => {
    const { object, sent, wakeAt } = objectWith();
    await wakeAt(1000, "/corq/dispatch");
    await object.alarm();
    expect(sent).toHaveLength(1);
    const [request] = sent;
    expect(request?.method).toBe("POST");
    expect(new URL(request?.url ?? "").pathname).toBe("/corq/dispatch");
    expect(request?.headers.get("authorization")).toBe("Bearer admin-token");
    expect(request?.headers.get(WAKE_UP_HEADER)).not.toBeNull();
  });

  it("an alarm whose dispatch is refused throws (retried by the platform)", async () => {
    const { object, wakeAt } = objectWith(503);
    await wakeAt(1000);
    await expect(object.alarm()).rejects.toThrow(/503/);
  });

  it("refuses what is not a wake-up request", async () => {
    const { object, storage } = objectWith();
    const post = (url: string, body: unknown) =>
      object.fetch(new Request(url, { method: "POST", body: JSON.stringify(body) }));
    expect((await post(WAKE_AT_URL, { at: "soon", path: "/dispatch" })).status).toBe(400);
    expect((await post(WAKE_AT_URL, { at: 1, path: "https://elsewhere.example/dispatch" })).status).toBe(400);
    expect((await post("https://corq.internal/other", { at: 1, path: "/dispatch" })).status).toBe(404);
    expect(storage.alarm).toBeNull();
  });
});
