// The HTTP API of docs/http-api.md. Every input is validated before anything is written; every
// refusal is problem+json (src/http/problem.ts).
import { Hono, type Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { z } from "zod";
import { CorqError, type SubscriptionDefinition, type SubscriptionStats } from "../index.js";
import { correlationKey, parseOrThrow, streamName, subscriptionName } from "../config.js";
import {
  appendBody,
  appendHeaders,
  count,
  deadLettersQuery,
  dispatchHeaders,
  doctorQuery,
  keysQuery,
  logQuery,
  releaseBody,
  tailQuery,
  rewindBody,
  slot as slotSchema,
  streamQuery,
} from "./apiSchemas.js";
import { openApiDocument } from "./openapi.js";
import { jsonBody } from "./jsonBody.js";
import { addRetentionRoutes } from "./retentionRoutes.js";
import { addAlertRoutes } from "./alertRoutes.js";
import { authenticate, requireScope, requireScopeOrSignature } from "./auth.js";
import { createAuthThrottle } from "./authThrottle.js";
import { waitForHorizon } from "./horizonRetry.js";
import {
  advanceAndDispatch,
  CELL_HEADER,
  cellInvoker,
  consumeInSlot,
  dispatchInBackground,
  selfInvoker,
  startConsumer,
} from "./dispatch.js";
import { armWakeUp, WAKE_UP_HEADER, wakeUpsFinding } from "./wakeUps.js";
import { settings } from "./env.js";
import { requireLocalHost } from "./localHost.js";
import { onError, problem } from "./problem.js";
import { toPrometheus } from "../metrics.js";
import { requestTrace } from "../tracing.js";
import { dashboard } from "./dashboard/routes.js";
import { scopesAllow, tokenId, tokenInput } from "../tokens.js";
import { idempotencyScope } from "./idempotencyScope.js";
import { redactedUrl } from "./redactedUrl.js";
import { getPathWithin, outsideBase, parseBasePath } from "./basePath.js";
import type { AppEnv, OpenCorq, OpenCorqFor } from "./types.js";

// query fields are named as the client sent them (`limit`, not `query.limit`)
const query = <T extends z.ZodType>(c: Context, schema: T): z.output<T> =>
  parseOrThrow(schema, c.req.query(), "invalid_input", "");

const param = <T extends z.ZodType>(c: Context, name: string, schema: T): z.output<T> =>
  parseOrThrow(schema, c.req.param(name), "invalid_input", name);

/**
 * The `:key` of a key route, percent-decoded strictly: Hono hands a segment that does not decode
 * (bytes that are no UTF-8, like an encoded lone surrogate) over as it is, which would name
 * another key; that is a 400 here. Then the key rule.
 */
function keyParam(c: Context): string {
  const segment = /\/keys\/([^/]*)\/[^/]+$/.exec(new URL(c.req.url).pathname)?.[1] ?? "";
  let key: string;
  try {
    key = decodeURIComponent(segment);
  } catch {
    throw new CorqError("invalid_input", "key: not percent-encoded UTF-8");
  }
  return parseOrThrow(correlationKey, key, "invalid_input", "key");
}

/**
 * The cell a dispatcher's invocation is for (`corq-cell`, src/http/dispatch.ts): its own handle
 * among `opened`'s cells; undefined without the header. A cell not in CORQ_CELLS is a 400.
 */
function cellHandle(c: Context, opened: OpenCorq): OpenCorq | undefined {
  const name = c.req.header(CELL_HEADER);
  if (name === undefined) return undefined;
  const handle = opened.cells?.get(name);
  if (handle) return handle;
  throw new CorqError(
    "invalid_input",
    opened.cells
      ? `${CELL_HEADER}: no cell ${JSON.stringify(name.slice(0, 40))} (cells: ${[...opened.cells.keys()].join(", ")})`
      : `${CELL_HEADER}: this deployment has no cells (CORQ_CELLS is not set)`,
  );
}

/**
 * The HTTP API and dashboard, for any runtime: `open` is how it reaches Postgres (Workers: a
 * handle per invocation, functions/database.ts; Node: the process's own, src/node/serve.ts).
 * `basePath` ("/corq"; default the root): the app answers the paths under it, given whole
 * (src/http/basePath.ts), and addresses everything it sends out under it.
 */
export function createApi(options: { subscriptions: SubscriptionDefinition[]; open: OpenCorqFor; basePath?: string }) {
  const { subscriptions, open } = options;
  const basePath = parseBasePath(options.basePath);
  // routes are written from "/": the prefix comes off the request's path before routing
  const app = new Hono<AppEnv>({ getPath: getPathWithin(basePath) });
  // failed authentications per client, kept for the life of this isolate (createApi runs once per isolate)
  const throttle = createAuthThrottle();
  app.onError(onError);
  app.notFound((c) => {
    // a known path with another method: 405 and the methods it has
    const allowed = allowedMethods(app.routes, c.req.path);
    if (allowed.length > 0) {
      return problem(
        405,
        "method_not_allowed",
        `${c.req.method} is not allowed on ${c.req.path}; use ${allowed.join(", ")}`,
        {},
        { allow: allowed.join(", ") },
      );
    }
    return problem(404, "not_found", `no route for ${c.req.method} ${basePath}${c.req.path}`);
  });
  // A request outside the prefix reached corq's fetch: most likely a router that strips the
  // prefix (Hono's app.mount does by default). corq needs the whole path to address its links
  // and its own invocations, so this says how to hand it over instead of guessing.
  app.use("*", async (c, next) => {
    if (!outsideBase(basePath, c.req.raw)) return next();
    return problem(
      404,
      "not_found",
      `corq is mounted at ${basePath}: ${new URL(c.req.url).pathname} is outside it. Hand corq the request ` +
        `with its path whole (app.all("${basePath}/*", (c) => corq.fetch(c.req.raw, c.env, c.executionCtx)), ` +
        `or app.mount("${basePath}", corq.fetch, { replaceRequest: false })), not with the prefix stripped`,
    );
  });
  app.use("*", requireLocalHost());

  // One database handle per request (HTTP statements; a pool with CORQ_DB_DRIVER=websocket), opened on first use, closed after the response.
  app.use("*", async (c, next) => {
    let opened: OpenCorq | undefined;
    const openOnce = () => (opened ??= open(c.env, subscriptions));
    c.set("corq", () => openOnce().corq);
    c.set("opened", openOnce);
    c.set("openCorq", () => open(c.env, subscriptions));
    c.set("db", () => openOnce().db);
    c.set("throttle", throttle);
    c.set("basePath", basePath);
    // consumers this request starts: through SELF, or here (never a URL: src/http/dispatch.ts)
    c.set("invoke", selfInvoker(c.env, { here: (request) => app.fetch(request, c.env, c.executionCtx), basePath }));
    try {
      await next();
    } finally {
      if (opened) c.executionCtx.waitUntil(opened.end());
    }
  });

  app.use("*", async (c, next) => {
    const { maxBodyBytes } = settings(c.env);
    const tooLarge = () => problem(413, "payload_too_large", `the body is over ${maxBodyBytes} bytes`);
    // A declared length is checked here; hono's bodyLimit (a chunked body) reads request.body,
    // which on Node makes a whole fetch Request of the incoming one (2 % of serve's CPU at
    // 1,000 appends/s: bench/serveProbe.ts --profile).
    if (c.req.method === "GET" || c.req.method === "HEAD") return next(); // no body (fetch refuses one)
    const length = c.req.header("content-length");
    if (c.req.header("transfer-encoding") === undefined && length !== undefined && /^\d+$/.test(length)) {
      return Number(length) > maxBodyBytes ? tooLarge() : next();
    }
    return bodyLimit({ maxSize: maxBodyBytes, onError: tooLarge })(c, next);
  });

  // Public: the driver's error text (user names, hosts, "password authentication failed …")
  // goes to the log only.
  app.get("/health", async (c) => {
    try {
      await c.var.corq().readyKeys(1);
      return c.json({ ok: true, db: "ok" });
    } catch (error) {
      console.error("corq: GET /health: the database check failed:", error);
      // an endpoint that could not be reached, where that is safe to say (functions/database.ts)
      const said = error instanceof CorqError && error.extra?.endpoint !== undefined ? error : undefined;
      return problem(503, "database_unavailable", said?.message ?? "the database is unavailable", {
        ...said?.extra,
        ok: false,
        db: "unavailable",
      });
    }
  });

  // Public: the description of this API (OpenAPI 3.1), made once per isolate.
  let description: string | undefined;
  app.get("/openapi.json", (c) => {
    description ??= JSON.stringify(openApiDocument({ basePath }));
    return c.body(description, 200, { "content-type": "application/json" });
  });

  app.post(
    "/streams/:stream/events",
    requireScope("append", { unless: (c) => settings(c.env).publicAppend }),
    async (c) => {
      const stream = param(c, "stream", streamName);
      const idempotencyKey = parseOrThrow(
        appendHeaders.shape["idempotency-key"],
        c.req.header("idempotency-key"),
        "invalid_input",
        "Idempotency-Key",
      );
      const body = await jsonBody(c, appendBody);
      // Its own handle, kept for the background work below (advance and dispatch).
      const opened = c.var.openCorq();
      let result: Awaited<ReturnType<typeof opened.corq.append>>;
      try {
        result = await opened.corq.append(stream, body.events as never, {
          expectedVersion: body.expectedVersion,
          idempotencyKey,
          // the key is the caller's own: another token's use of it is another key
          idempotencyScope: idempotencyScope(c.var.principal),
          // the request's W3C trace context, kept with or without a tracer (invalid: ignored, never a 4xx)
          trace: requestTrace({ traceparent: c.req.header("traceparent"), tracestate: c.req.header("tracestate") }),
        });
      } catch (error) {
        c.executionCtx.waitUntil(opened.end());
        throw error;
      }
      // A repeat of an idempotent append wrote nothing: its answer again, no delivery to start.
      if (result.replayed) {
        c.executionCtx.waitUntil(opened.end());
        const { replayed: _, ...first } = result;
        return c.json(first, 201, { "idempotent-replayed": "true" });
      }
      // On Node the append's NOTIFY has woken the process's consumers (src/node/runner.ts).
      if (c.env.CORQ_NODE) return c.json(result, 201);
      // Deliver without waiting for the cron: advance and dispatch consumers in the background.
      c.executionCtx.waitUntil(
        advanceAndDispatch(c.env, subscriptions, c.var.invoke, {
          opened,
          // over cells: the appended stream's cell only
          cell: (result as { cell?: string }).cell,
          coalesce: true,
          eventNames: [...new Set(body.events.map((e) => e.name))],
          // a delayed event: the kick arms a wake-up for its time (src/http/wakeUps.ts)
          delayed: body.events.some((e) => e.delayMs !== undefined || e.deliverAt !== undefined),
        }).catch((error) => console.error("corq: background advance failed:", error)),
      );
      return c.json(result, 201);
    },
  );

  // The dashboard (GET /, /login, /ui/*): its own session cookie instead of the bearer token.
  app.route("/", dashboard({ throttle, subscriptions }));

  // Every route below authenticates here (the signed webhook has its own check) and states
  // the scope it needs with requireScope (src/http/auth.ts). A path without a route needs a
  // valid token too: 401 without, 404 with.
  app.use("*", authenticate({ unless: (c) => c.req.path === "/dead-letters/retry" }));

  addRetentionRoutes(app);
  addAlertRoutes(app);

  app.get("/streams/:stream", requireScope("read"), async (c) => {
    const stream = param(c, "stream", streamName);
    const { from, limit } = query(c, streamQuery);
    // an erased stream adds erased: true and its version (the tombstone)
    return c.json(await c.var.corq().streamPage(stream, { from, limit }));
  });

  // erasure: the stream's events leave the log and every queue; its version stays
  app.delete("/streams/:stream", requireScope("admin"), async (c) =>
    c.json(await c.var.corq().eraseStream(param(c, "stream", streamName))),
  );

  app.get("/events", requireScope("read"), async (c) => {
    const { after, limit } = query(c, logQuery);
    return c.json(await c.var.corq().readLog({ after, limit }));
  });

  app.get("/events/tail", requireScope("read"), async (c) => {
    const { before, limit } = query(c, tailQuery);
    return c.json(await c.var.corq().logTail({ before, limit }));
  });

  app.get("/subscriptions", requireScope("read"), async (c) =>
    c.json({ subscriptions: (await c.var.corq().stats()).subscriptions.map((s) => asSeenBy(c, s)) }),
  );

  app.get("/subscriptions/:name", requireScope("read"), async (c) =>
    c.json(asSeenBy(c, await c.var.corq().subscription(param(c, "name", subscriptionName)))),
  );

  app.put("/subscriptions/:name", requireScope("admin"), async (c) => {
    const name = param(c, "name", subscriptionName);
    const body = await jsonBody(c, z.unknown());
    const { created, subscription, secret } = await c.var.corq().putSubscription(name, body);
    return c.json(secret === undefined ? subscription : { ...subscription, secret }, created ? 201 : 200);
  });

  app.delete("/subscriptions/:name", requireScope("admin"), async (c) => {
    await c.var.corq().deleteSubscription(param(c, "name", subscriptionName));
    return c.body(null, 204);
  });

  app.get("/subscriptions/:name/keys", requireScope("read"), async (c) => {
    const name = param(c, "name", subscriptionName);
    return c.json(await c.var.corq().keyPage(name, query(c, keysQuery)));
  });

  for (const action of ["pause", "resume"] as const) {
    app.post(`/subscriptions/:name/${action}`, requireScope("operate"), async (c) => {
      const name = param(c, "name", subscriptionName);
      await c.var.corq()[action](name);
      // what waited while it was paused, without waiting for the cron
      if (action === "resume") dispatchInBackground(c, subscriptions, "a resume");
      return c.json(asSeenBy(c, await c.var.corq().subscription(name)));
    });
    // the key percent-encoded in the path (a key may hold "/", "?", "#", spaces …)
    app.post(`/subscriptions/:name/keys/:key/${action}`, requireScope("operate"), async (c) => {
      const name = param(c, "name", subscriptionName);
      const key = keyParam(c);
      const state = await c.var.corq()[action === "pause" ? "pauseKey" : "resumeKey"](name, key);
      // its events, without waiting for the cron
      if (action === "resume") dispatchInBackground(c, subscriptions, "a resume");
      return c.json(state);
    });
  }

  app.post("/subscriptions/:name/rewind", requireScope("operate"), async (c) => {
    const name = param(c, "name", subscriptionName);
    const body = await jsonBody(c, rewindBody);
    const result = await c.var.corq().rewind(name, body);
    dispatchInBackground(c, subscriptions, "a rewind"); // deliver the requeued events without waiting for the cron
    return c.json(result);
  });

  app.post("/advance", requireScope("admin"), async (c) => c.json({ advanced: await c.var.corq().advance() }));

  // What the cron does, on request: advance, then fan out consumer invocations.
  // With `corq-after-horizon` (a kick's retry, src/http/horizonRetry.ts): first wait until no
  // committed event waits above the xmin horizon, answer 202, then advance and dispatch.
  // Over cells every cell, each on its own (`corq-cell`: that cell only, as a cell's horizon retry asks).
  app.post("/dispatch", requireScope("admin"), async (c) => {
    const invoke = c.var.invoke;
    const after = c.req.header("corq-after-horizon");
    const tx =
      after === undefined
        ? undefined
        : parseOrThrow(dispatchHeaders.shape["corq-after-horizon"], after, "invalid_input", "corq-after-horizon");
    // its own handle, for work that outlives the request (closed by the dispatch)
    const opened = c.var.openCorq();
    let inCell: OpenCorq | undefined;
    try {
      inCell = cellHandle(c, opened);
    } catch (error) {
      c.executionCtx.waitUntil(opened.end());
      throw error;
    }
    const cell = inCell?.cell;
    // the wake-up object's alarm (src/http/wakeUps.ts): answered at once, so the object is not
    // held (and billed) for the dispatch; the dispatch arms the next wake-up at its end
    if (c.req.header(WAKE_UP_HEADER) !== undefined) {
      c.executionCtx.waitUntil(
        advanceAndDispatch(c.env, subscriptions, invoke, { opened, cell, coalesce: true, wakeUp: true }).catch(
          (error) => console.error("corq: dispatch at a wake-up failed:", error),
        ),
      );
      return c.json({ wokeUp: true }, 202);
    }
    if (tx === undefined) {
      return c.json(await advanceAndDispatch(c.env, subscriptions, invoke, { opened, cell }));
    }
    // the polls count against this invocation's subrequests like the drain's statements (a
    // transaction id is one cell's: its horizon there)
    let passed: boolean;
    try {
      passed = await waitForHorizon((inCell ?? opened).corq, tx);
    } catch (error) {
      c.executionCtx.waitUntil(opened.end());
      throw error;
    }
    c.executionCtx.waitUntil(
      advanceAndDispatch(c.env, subscriptions, invoke, { opened, cell, coalesce: true, afterHorizon: true }).catch(
        (error) => console.error("corq: dispatch after the horizon failed:", error),
      ),
    );
    return c.json({ horizonPassed: passed }, 202);
  });

  app.post("/consume/:subscription", requireScope("admin"), async (c) => {
    const name = param(c, "subscription", subscriptionName);
    const budget = c.req.header("corq-budget-ms");
    const budgetMs = budget === undefined ? undefined : parseOrThrow(count, budget, "invalid_input", "corq-budget-ms");
    // a consumer a dispatcher started holds a consumer slot (dispatch.ts); over cells, in its cell
    const slotHeader = c.req.header("corq-slot");
    const inCell = cellHandle(c, c.var.opened());
    if (slotHeader !== undefined) {
      const slot = parseOrThrow(slotSchema, slotHeader, "invalid_input", "corq-slot");
      if (c.var.opened().cells && !inCell)
        throw new CorqError("invalid_input", `corq-slot: a consumer slot is one cell's; name it in ${CELL_HEADER}`);
      const opened = inCell ?? c.var.opened();
      // the invocations it starts consume from its cell too
      const invoke = cellInvoker(c.var.invoke, opened);
      const consumed = await consumeInSlot(c.env, {
        subscriptions,
        opened,
        first: { name, slot },
        continueIn: (next) =>
          c.executionCtx.waitUntil(
            startConsumer(c.env, invoke, next).then(
              (r) => r.body?.cancel(),
              (error) => console.error("corq: consumer invocation failed:", error),
            ),
          ),
      });
      // a failure's backoff, a rate limit's room, a Retry-After this consumer left: woken at its time
      const { leftWaiting, dueAt, ...done } = consumed;
      const arming = leftWaiting ? await armWakeUp(c.env, invoke, { opened, subscriptions, dueAt }) : 0;
      return c.json({ ...done, subrequests: done.subrequests + arming });
    }
    const { first, batches, events, waiting } = await (inCell?.corq ?? c.var.corq()).drain(
      name,
      budgetMs === undefined ? { maxBatches: 1 } : { budgetMs },
    );
    // an operator's consume that left keys waiting (a failed batch's backoff …) is woken at their time too
    if (waiting > 0) await armWakeUp(c.env, c.var.invoke, { opened: inCell ?? c.var.opened(), subscriptions });
    if (first === null) return c.body(null, 204);
    return c.json(budgetMs === undefined ? first : { ...first, batches, eventsTotal: events });
  });

  app.get("/dead-letters", requireScope("read"), async (c) => {
    const { subscription, limit } = query(c, deadLettersQuery);
    return c.json({ deadLetters: await c.var.corq().deadLetters({ subscription, limit }) });
  });

  app.post("/dead-letters/retry", requireScopeOrSignature("operate"), async (c) => {
    const body = await jsonBody(c, releaseBody);
    // a signed request is acted on once per webhook-id (a replay gets 409)
    const webhookId = c.req.header("authorization") === undefined ? c.req.header("webhook-id") : undefined;
    return c.json(await c.var.corq().releaseDeadLetters({ ...body, webhookId }));
  });

  app.get("/stats", requireScope("read"), async (c) => {
    const stats = await c.var.corq().stats();
    return c.json({ ...stats, subscriptions: stats.subscriptions.map((s) => asSeenBy(c, s)) });
  });

  // Scoped tokens: the secret is in the answer to POST only; revoking takes effect on the next request.
  app.post("/tokens", requireScope("admin"), async (c) => {
    const body = await jsonBody(c, tokenInput);
    return c.json(await c.var.corq().createToken(body), 201);
  });

  app.get("/tokens", requireScope("admin"), async (c) => c.json({ tokens: await c.var.corq().listTokens() }));

  app.delete("/tokens/:id", requireScope("admin"), async (c) => {
    await c.var.corq().revokeToken(param(c, "id", tokenId));
    // the Node runtime's token cache forgets it here, whatever spelling of the path got here
    c.env.CORQ_NODE?.tokenRevoked?.();
    return c.body(null, 204);
  });

  // Prometheus text (src/metrics.ts), read from the database: every runtime and process answers the same.
  app.get("/metrics", requireScope("read"), async (c) => {
    const { prometheus } = c.var.opened();
    const text = prometheus ? await prometheus() : toPrometheus(await c.var.corq().metrics());
    return c.body(text, 200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" });
  });

  // What is wrong and what to do (src/doctor.ts); 200 whatever it finds: `ok` says.
  app.get("/doctor", requireScope("admin"), async (c) => {
    const { heldOverMs } = query(c, doctorQuery);
    const report = await c.var.corq().doctor({ heldOverMs });
    // the Worker's own: whether keys due before the next cron wait for it (src/http/wakeUps.ts)
    return c.json({ ...report, findings: [...report.findings, ...wakeUpsFinding(c.env)] });
  });

  return app;
}

/** A subscription as the request's principal may see it: the push URL as scheme and host below the admin scope. */
function asSeenBy(c: Context<AppEnv>, subscription: SubscriptionStats): SubscriptionStats {
  const { principal } = c.var;
  if (!subscription.deliver || (principal && scopesAllow(principal.scopes, "admin"))) return subscription;
  return { ...subscription, deliver: { ...subscription.deliver, url: redactedUrl(subscription.deliver.url) } };
}

/** The methods the app answers on `path` (HEAD with GET, as Hono answers it); none for an unknown path. */
export function allowedMethods(routes: { method: string; path: string }[], path: string): string[] {
  const methods = new Set<string>();
  for (const route of routes) {
    if (route.method === "ALL" || !routePattern(route.path).test(path)) continue;
    methods.add(route.method);
    if (route.method === "GET") methods.add("HEAD");
  }
  return [...methods].sort();
}

const patterns = new Map<string, RegExp>();
function routePattern(path: string): RegExp {
  let pattern = patterns.get(path);
  if (!pattern) {
    const source = path
      .split("/")
      .map((part) =>
        part === "*" ? ".*" : part.startsWith(":") ? "[^/]+" : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"),
      )
      .join("/");
    pattern = new RegExp(`^${source}$`);
    patterns.set(path, pattern);
  }
  return pattern;
}
