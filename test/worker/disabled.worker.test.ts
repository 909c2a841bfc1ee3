// A deployment without CORQ_ADMIN_TOKEN / CORQ_WEBHOOK_SECRET: the admin API, the dashboard
// and the webhook refuse everything (401) rather than run open; nothing is written.
import { describe, expect, it } from "vitest";
import { sign } from "../../src/webhookSignature.js";
import { useStack } from "../helpers/stack.js";

const { state, api } = useStack({ vars: { CORQ_ADMIN_TOKEN: "", CORQ_WEBHOOK_SECRET: "" } });

describe("secrets not configured", () => {
  it("refuses admin requests, appends, the dashboard and the webhook with 401, whatever the credentials", async () => {
    for (const token of [null, "", "dev-admin-token", "anything"]) {
      for (const [method, path, body] of [
        ["GET", "/stats", undefined],
        ["GET", "/subscriptions", undefined],
        ["POST", "/streams/s/events", { events: [{ name: "E", data: {} }] }],
        ["POST", "/dead-letters/retry", { subscription: "greeter" }],
      ] as const) {
        const response = await api(method, path, { token, body });
        expect(response.status, `${method} ${path} with ${token}`).toBe(401);
        expect(response.json.type).toMatch(/admin_disabled|webhook_disabled/);
      }
    }
    const body = JSON.stringify({ subscription: "greeter" });
    const timestamp = Math.floor(Date.now() / 1000);
    for (const secret of ["", "dev-webhook-secret"]) {
      const headers = {
        "webhook-id": "msg_1",
        "webhook-timestamp": String(timestamp),
        "webhook-signature": await sign(secret || "x", { id: "msg_1", timestamp, body }),
      };
      const response = await api("POST", "/dead-letters/retry", { token: null, body, headers });
      expect(response).toMatchObject({ status: 401, json: { type: "urn:corq:problem:webhook_disabled" } });
    }
    const login = await fetch(`${state.stack.url}/login`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", origin: state.stack.url },
      body: "token=",
    });
    expect(login.status).toBe(401);
    expect(await login.text()).toContain("CORQ_ADMIN_TOKEN");
    expect(login.headers.get("set-cookie")).toBeNull();
    expect((await fetch(`${state.stack.url}/`, { redirect: "manual" })).headers.get("location")).toBe("/login");
    expect((await api("GET", "/health", { token: null })).status).toBe(200);
    const { rows } = await state.db.query("SELECT count(*)::int AS n FROM corq.events");
    expect(rows[0].n).toBe(0);
  });
});
