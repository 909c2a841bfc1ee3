// A Worker without the wake-up binding (a wrangler.toml from before it: fixtures/noWakeUps.toml)
// works as before: a key due before the next cron waits for the cron (or an append), and GET
// /doctor, `corq doctor` and the dashboard's overview say so, with the lines to add.
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { run } from "../../cli/run.js";
import { logIn } from "../helpers/dashboardForm.js";
import { useReceiver } from "../helpers/receiver.js";
import { eventually, useStack } from "../helpers/stack.js";

const { state, api } = useStack({
  vars: { CORQ_PUSH_ALLOW_PRIVATE: "true" },
  config: fileURLToPath(new URL("./fixtures/noWakeUps.toml", import.meta.url)),
});
const hook = useReceiver();

describe("without the wake-up binding", () => {
  it("GET /doctor and corq doctor say that wake-ups wait for the cron, and what to add (a warning: ok stays true)", async () => {
    const { json } = await api("GET", "/doctor");
    expect(json.ok).toBe(true);
    expect(json.findings).toEqual([
      expect.objectContaining({
        severity: "warning",
        code: "wake_ups_wait_for_cron",
        message: expect.stringContaining("wait for the next cron"),
        fix: expect.stringMatching(/\[\[durable_objects\.bindings\]\].*CORQ_WAKE_UPS.*new_sqlite_classes/),
      }),
    ]);
    let out = "";
    const code = await run(["doctor"], {
      env: { CORQ_URL: state.stack.url, CORQ_TOKEN: state.stack.adminToken },
      out: { write: (text: string) => (out += text) },
      err: { write: () => undefined },
    });
    expect(code).toBe(0);
    expect(out).toContain("wake_ups_wait_for_cron");
  });

  it("the dashboard's overview says so", async () => {
    const cookie = await logIn(state.stack.url, state.stack.adminToken);
    const page = await (await fetch(`${state.stack.url}/`, { headers: { cookie } })).text();
    expect(page).toContain('data-testid="wake-ups-wait-for-cron"');
  });

  it("a delayed event waits for the cron, as before; the cron delivers it", async () => {
    const created = await api("PUT", "/subscriptions/cron-delay", {
      body: { events: ["CronDelay"], key: "data.k", from: "now", deliver: { url: hook.receiver.url } },
    });
    expect(created.status).toBe(201);
    hook.secret = created.json.secret;
    const appended = await api("POST", "/streams/cron-delay-1/events", {
      body: { events: [{ name: "CronDelay", data: { k: "a" }, delayMs: 500 }] },
    });
    expect(appended.status).toBe(201);
    // due after half a second; nothing wakes the Worker (no cron fires in this file unless asked)
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(hook.receiver.deliveries).toHaveLength(0);
    await state.stack.runCron();
    await eventually(async () => expect(hook.receiver.deliveries).toHaveLength(1));
  });
});
