// Alerts over HTTP (docs/http-api.md, "Alerts"), admin only: put, list and delete them, and run
// one pass now. The Worker's cron runs its pass the same way (functions/createWorker.ts): through
// SELF, as an invocation with a subrequest budget of its own — a slow receiver then holds up
// neither the cron's advance nor its consumers.
import type { Hono } from "hono";
import { z } from "zod";
import { alertName } from "../alertInput.js";
import { parseOrThrow } from "../config.js";
import type { AlertInput } from "../types.js";
import { requireScope } from "./auth.js";
import { settings } from "./env.js";
import { jsonBody } from "./jsonBody.js";
import type { AppEnv, Invoke } from "./types.js";

// Subrequests a pass keeps for its statements (8 at most: the pass, three conditions, the whole
// lag, record, claim, settle) beside its sends; and a pass sends at most this many.
const SUBREQUESTS_BESIDE_SENDS = 8;
const MAX_SENDS_PER_PASS = 100;

export function addAlertRoutes(app: Hono<AppEnv>): void {
  app.get("/alerts", requireScope("admin"), async (c) => c.json({ alerts: await c.var.corq().alerts() }));

  app.put("/alerts/:name", requireScope("admin"), async (c) => {
    const name = parseOrThrow(alertName, c.req.param("name"), "invalid_input", "name");
    // validated by putAlert, whose refusals name the fields as sent (url, on.0, lagOver)
    const body = await jsonBody(c, z.unknown());
    const { created, alert, secret } = await c.var.corq().putAlert(name, body as AlertInput);
    return c.json(secret === undefined ? alert : { ...alert, secret }, created ? 201 : 200);
  });

  app.delete("/alerts/:name", requireScope("admin"), async (c) => {
    await c.var.corq().deleteAlert(parseOrThrow(alertName, c.req.param("name"), "invalid_input", "name"));
    return c.body(null, 204);
  });

  // One pass now, within this invocation's subrequests (what the cron starts every tick).
  app.post("/alerts/check", requireScope("admin"), async (c) => {
    const { maxSubrequests } = settings(c.env);
    const maxSends = Math.max(1, Math.min(MAX_SENDS_PER_PASS, maxSubrequests - SUBREQUESTS_BESIDE_SENDS));
    return c.json(await c.var.corq().checkAlerts({ maxSends }));
  });
}

/** The cron's alerts pass: POST /alerts/check as an invocation of its own (SELF), or here without the binding. */
export async function alertOnCron(adminToken: string | undefined, invoke: Invoke): Promise<void> {
  const response = await invoke("/alerts/check", {
    method: "POST",
    headers: { authorization: `Bearer ${adminToken ?? ""}` },
  });
  const text = await response.text();
  if (!response.ok) console.error(`corq: the cron's alerts pass failed (${response.status}): ${text}`);
}
