// Retention over HTTP (docs/http-api.md, "Retention"): read the policy and horizon, set the
// policy, run one pass now. The cron starts a pass the same way (functions/createWorker.ts):
// through SELF, as an invocation with a subrequest budget of its own.
import type { Hono } from "hono";
import { requireScope } from "./auth.js";
import { retentionBody } from "./apiSchemas.js";
import { settings } from "./env.js";
import { jsonBody } from "./jsonBody.js";
import type { AppEnv, Invoke } from "./types.js";

// Subrequests a pass keeps back: its first statement (the policy) and the answer's margin. Each
// chunk is one transaction: on the HTTP driver a WebSocket session of its own, one subrequest.
const SUBREQUESTS_BESIDE_CHUNKS = 2;

export function addRetentionRoutes(app: Hono<AppEnv>): void {
  app.get("/retention", requireScope("read"), async (c) => c.json(await c.var.corq().retention()));

  app.put("/retention", requireScope("admin"), async (c) =>
    c.json(await c.var.corq().setRetention(await jsonBody(c, retentionBody))),
  );

  // One pass, bounded: at most CORQ_RETENTION_CHUNKS chunks, within this invocation's
  // subrequests, started within 10 s. `done: false` says more remains: the cron (and serve)
  // go on from where it stopped, or call again.
  app.post("/retention/run", requireScope("admin"), async (c) => {
    const { retentionChunks, maxSubrequests } = settings(c.env);
    const maxChunks = Math.max(1, Math.min(retentionChunks, maxSubrequests - SUBREQUESTS_BESIDE_CHUNKS));
    return c.json(await c.var.corq().runRetention({ maxChunks, budgetMs: 10_000 }));
  });
}

/** The cron's retention pass: POST /retention/run as an invocation of its own (SELF), or here without the binding. */
export async function retainOnCron(adminToken: string | undefined, invoke: Invoke): Promise<void> {
  const response = await invoke("/retention/run", {
    method: "POST",
    headers: { authorization: `Bearer ${adminToken ?? ""}` },
  });
  const text = await response.text();
  if (!response.ok) console.error(`corq: the cron's retention pass failed (${response.status}): ${text}`);
}
