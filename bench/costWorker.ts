// The Worker `npm run bench -- --only cost` runs (bench/cost.ts): corq with one code subscription
// (a no-op handler) and nothing else, its invocations counted by kind — those that come through
// the front door (appends), those corq starts through its SELF binding (consumers, a kick's
// retry after the horizon, retention passes) and the cron's.
//
// The counts live in the module: under wrangler dev one isolate serves every invocation of this
// Worker, SELF's included, so they add up across them (a deployed Worker has many isolates; this
// one is only ever run locally). GET /__bench/invocations reads them and is not counted.
import { createWorker, type WorkerApp } from "../functions/createWorker.js";

export const app: WorkerApp = {
  subscriptions: [{ name: "cost-code", events: ["Costed"], handle: () => undefined }],
};

const worker = createWorker(app);
const counts: Record<string, number> = {};
const count = (kind: string) => {
  counts[kind] = (counts[kind] ?? 0) + 1;
};

/** What an invocation is, by what corq answers it with (src/http/api.ts). */
function kindOf(request: Request, path: string): string {
  if (request.method === "POST" && /^\/streams\/[^/]+\/events$/.test(path)) return "append";
  if (path.startsWith("/consume/")) return "consumer";
  if (path === "/dispatch") return request.headers.has("corq-after-horizon") ? "horizonRetry" : "dispatch";
  if (path === "/retention/run") return "retention";
  return "other";
}

export default {
  async fetch(request: Request, env: Parameters<typeof worker.fetch>[1], ctx: Parameters<typeof worker.fetch>[2]) {
    const path = new URL(request.url).pathname;
    if (path === "/__bench/invocations") return Response.json(counts);
    count(kindOf(request, path));
    return worker.fetch(request, env, ctx);
  },
  async scheduled(
    controller: unknown,
    env: Parameters<typeof worker.scheduled>[1],
    ctx: Parameters<typeof worker.scheduled>[2],
  ) {
    count("cron");
    return worker.scheduled(controller, env, ctx);
  },
};
