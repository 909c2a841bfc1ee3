// CorqWakeUps: the Durable Object that wakes a deployment at a key's due time (src/http/wakeUps.ts
// says who asks and when). One object per deployment (idFromName("corq") in this Worker's own
// namespace) holding one alarm:
//
//   POST /wake-at { at, path }  the alarm moves to `at` when none is set or `at` is earlier —
//                               never later: one alarm in flight, at the earliest time asked for
//   alarm()                     POST `path` (<basePath>/dispatch) with corq-wake-up through SELF,
//                               which answers 202 and dispatches in its background; that
//                               dispatch asks again for the next due time. An answer that is not
//                               2xx throws: the platform retries the alarm (2 s backoff, 6 times),
//                               and the cron is the safety net after that.
//
// Exported from the user's Worker module (export { CorqWakeUps } from "corqueue/worker") and
// bound in wrangler.toml (docs/deploy.md, "Wake-ups"). It holds no database connection and no
// secret of its own: the Worker's env (SELF, CORQ_ADMIN_TOKEN) is the object's env too.
import { z } from "zod";
import { INTERNAL_ORIGIN } from "../src/http/dispatch.js";
import type { Env } from "../src/http/types.js";
import { WAKE_AT_URL, WAKE_UP_HEADER } from "../src/http/wakeUps.js";

/** What the object uses of its DurableObjectState. */
interface WakeUpsState {
  storage: {
    getAlarm(): Promise<number | null>;
    setAlarm(scheduledTime: number): Promise<void>;
    get<T>(key: string): Promise<T | undefined>;
    put<T>(key: string, value: T): Promise<void>;
  };
}

const wakeAt = z.object({
  at: z.number().int().min(0).max(8.64e15),
  // the dispatch path under the app's basePath: "/dispatch" or "/<prefix>/dispatch"
  path: z.string().regex(/^(\/[A-Za-z0-9._~-]+)*\/dispatch$/),
});

export class CorqWakeUps {
  readonly #state: WakeUpsState;
  readonly #env: Env;
  /** the dispatch path, as stored (read once per instance) */
  #path: string | undefined;

  constructor(state: WakeUpsState, env: Env) {
    this.#state = state;
    this.#env = env;
  }

  async fetch(request: Request): Promise<Response> {
    if (request.method !== "POST" || new URL(request.url).pathname !== new URL(WAKE_AT_URL).pathname)
      return new Response("not found", { status: 404 });
    const parsed = wakeAt.safeParse(await request.json().catch(() => undefined));
    if (!parsed.success) return new Response("expected { at, path }", { status: 400 });
    const { at, path } = parsed.data;
    const { storage } = this.#state;
    // while the alarm handler runs, getAlarm() is null unless set since it started: a time asked
    // for meanwhile is set, and fires after the handler
    const current = await storage.getAlarm();
    const set = current === null || at < current;
    if (set) await storage.setAlarm(at);
    this.#path ??= await storage.get<string>("path");
    if (this.#path !== path) {
      await storage.put("path", path);
      this.#path = path;
    }
    return Response.json({ alarmAt: set ? at : current, set });
  }

  async alarm(): Promise<void> {
    this.#path ??= await this.#state.storage.get<string>("path");
    const path = this.#path ?? "/dispatch";
    const self = this.#env.SELF;
    if (!self) {
      console.error("corq: a wake-up needs the SELF service binding to dispatch (wrangler.toml: services)");
      return;
    }
    const response = await self.fetch(
      new Request(new URL(path, INTERNAL_ORIGIN), {
        method: "POST",
        headers: { authorization: `Bearer ${this.#env.CORQ_ADMIN_TOKEN ?? ""}`, [WAKE_UP_HEADER]: "alarm" },
      }),
    );
    await response.body?.cancel();
    if (!response.ok) throw new Error(`corq: the wake-up's dispatch answered ${response.status}`);
  }
}
