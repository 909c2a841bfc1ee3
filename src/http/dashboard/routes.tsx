// The operator dashboard, served by the Worker: server-rendered pages (Hono JSX), a login
// that keeps a signed session in an http-only cookie, and form POSTs for the actions.
import { Hono, type Context } from "hono";
import type { HtmlEscapedString } from "hono/utils/html";
import type { Child } from "hono/jsx";
import { csrf } from "hono/csrf";
import { z } from "zod";
import { CorqError, type Corq, type SubscriptionDefinition, type SubscriptionStats } from "../../index.js";
import { dispatchInBackground } from "../dispatch.js";
import { subscriptionName, parseOrThrow } from "../../config.js";
import { adminTokenRefusal, principalOf, requireScope } from "../auth.js";
import { scopesAllow, type TokenScope } from "../../tokens.js";
import { redactedUrl } from "../redactedUrl.js";
import { ProblemError } from "../problem.js";
import { requestOrigin } from "../requestClient.js";
import { css, script } from "./assets.js";
import { Alerts } from "./alerts.js";
import { DeadLetters } from "./deadLetters.js";
import { Keys } from "./keys.js";
import { BasePath, CanOperate, Page } from "./layout.js";
import { pathWithin, underBase } from "../basePath.js";
import { Login } from "./login.js";
import { Overview } from "./overview.js";
import { wakeUpsFinding } from "../wakeUps.js";
import { securityHeaders } from "./securityHeaders.js";
import { endSession, hasSession, sessionPrincipal, startSession } from "./session.js";
import { LogTail, Stream } from "./streams.js";
import { TIMELINE_KEYS, TimelinePage, windows } from "./timeline.js";
import type { AppEnv, AuthThrottle, Principal } from "../types.js";

type DashboardContext = Context<AppEnv>;

const KEYS_PER_PAGE = 50;
const EVENTS_PER_PAGE = 100;

const keysQuery = z.object({
  status: z
    .enum(["ready", "leased", "backoff", "dead", "paused", "idle"])
    .or(z.literal("").transform(() => undefined))
    .optional(),
  after: z
    .string()
    .min(1)
    .max(1000)
    .refine((key) => !key.includes("\u0000"), "must not contain U+0000")
    .optional(),
});
const subscriptionFilter = z.object({
  subscription: subscriptionName.or(z.literal("").transform(() => undefined)).optional(),
});
const timelineQuery = z.object({
  subscription: subscriptionName.or(z.literal("").transform(() => undefined)).optional(),
  minutes: z
    .enum(windows.map(String) as [string, ...string[]])
    .transform(Number)
    .default(1),
});
const tailQuery = z.object({
  stream: z.string().optional(),
  // the position the page before ended at: a cursor made by the page itself
  before: z
    .string()
    .regex(/^[1-9]\d{0,15}$/, "must be a position")
    .transform(Number)
    .optional(),
});
const streamQuery = z.object({
  from: z
    .string()
    .regex(/^\d{1,9}$/)
    .transform(Number)
    .default(0),
});
const actionForm = z.object({
  subscription: subscriptionName,
  key: z.string().min(1).max(1000).optional(),
  // where to come back to: a path of the dashboard only (localPath); default its overview
  back: z.string().max(2000).optional(),
  // rewind: a position, or "beginning"
  to: z
    .string()
    .regex(/^(\d{1,16}|beginning)$/, "must be a position or beginning")
    .transform((to) => (to === "beginning" ? ("beginning" as const) : Number(to)))
    .optional(),
});
const actions = ["retry", "skip", "pause", "resume", "pause-key", "resume-key", "rewind"] as const;

// After an action the page says what was done. The URL carries only the facts (`done`,
// `count`, `of`), validated here; the sentence is ours, so a crafted link cannot put words on
// the page.
const doneQuery = z.object({
  done: z.enum(actions),
  count: z
    .string()
    .regex(/^\d{1,9}$/)
    .transform(Number)
    .default(0),
  of: subscriptionName,
});
const doneParams = ["done", "count", "of"];

function noticeOf(c: DashboardContext): string | undefined {
  const parsed = doneQuery.safeParse(c.req.query());
  if (!parsed.success) return undefined;
  const { done, count, of } = parsed.data;
  if (done === "pause" || done === "resume") return `${of} ${done === "pause" ? "paused" : "resumed"}.`;
  if (done === "pause-key" || done === "resume-key")
    return `A key of ${of} ${done === "pause-key" ? "paused" : "resumed"}.`;
  if (done === "rewind") return `Rewound ${of}: ${count} event${count === 1 ? "" : "s"} queued again.`;
  const keys = `${count} dead key${count === 1 ? "" : "s"}`;
  return done === "retry" ? `Retried ${keys} of ${of}.` : `Skipped the failed event of ${keys} of ${of}.`;
}

/**
 * `back` as a path and query of this site under the dashboard's prefix, or null. Judged on what
 * the browser will make of it, not on its text: `/.//evil.example` and `/%2e//evil.example`
 * normalise to `//evil.example`, which a Location header sends to another host.
 */
function localPath(back: string, site: { origin: string; basePath: string }): string | null {
  const { origin, basePath } = site;
  if (!back.startsWith("/") || back.includes("\\")) return null;
  let url: URL;
  try {
    url = new URL(back, origin);
  } catch {
    return null;
  }
  if (url.origin !== origin || !url.pathname.startsWith("/") || url.pathname.startsWith("//")) return null;
  // the user's own pages beside a mounted dashboard are not its to send the browser to
  if (pathWithin(basePath, url.pathname) === null) return null;
  return url.pathname + url.search;
}

/** A dashboard path ("/login", "/") as the browser must request it: under the app's prefix. */
const urlOf = (c: DashboardContext, path: string) => underBase(c.var.basePath, path);

/** A page with its links, assets and forms under the app's prefix (layout.tsx, useHref). */
const mounted = (c: DashboardContext, page: Child) => (
  <BasePath.Provider value={c.var.basePath}>{page}</BasePath.Provider>
);

/** The path and query of this request, to come back to after an action. */
const here = (c: DashboardContext) => {
  const url = new URL(c.req.url);
  for (const name of doneParams) url.searchParams.delete(name);
  return url.pathname + url.search;
};

export function dashboard(options: {
  throttle: AuthThrottle;
  /** The code subscriptions (a dispatch after an action advances them too). */
  subscriptions?: SubscriptionDefinition[];
}): Hono<AppEnv> {
  const { throttle } = options;
  const app = new Hono<AppEnv>();

  for (const path of ["/", "/login", "/logout", "/favicon.ico", "/ui/*", "/assets/*"]) app.use(path, securityHeaders());

  // no icon: browsers ask for one on every page, and a 401 would be noise
  app.get("/favicon.ico", (c) => c.body(null, 204, { "cache-control": "public, max-age=86400" }));
  app.get("/assets/corq.css", (c) =>
    c.body(css, 200, { "content-type": "text/css; charset=utf-8", "cache-control": "public, max-age=300" }),
  );
  app.get("/assets/corq.js", (c) =>
    c.body(script, 200, { "content-type": "text/javascript; charset=utf-8", "cache-control": "public, max-age=300" }),
  );

  // Forms post from our own origin only (SameSite=Strict already keeps the cookie off cross-site posts).
  // forms come from the origin the browser sees (behind a trusted TLS proxy: https)
  const sameOrigin = csrf({ origin: (origin, c) => origin === requestOrigin(c) });
  app.use("/login", sameOrigin);
  app.use("/logout", sameOrigin);
  app.use("/ui/actions/*", sameOrigin);

  app.get("/login", async (c) => {
    const refusal = adminTokenRefusal(c.env);
    if (refusal) return c.html(mounted(c, <Login disabled={refusal.message} />), refusal.status as 401);
    if (await hasSession(c)) return c.redirect(urlOf(c, "/"), 303);
    return c.html(mounted(c, <Login />));
  });

  app.post("/login", async (c) => {
    const refusal = adminTokenRefusal(c.env);
    if (refusal) return c.html(mounted(c, <Login disabled={refusal.message} />), refusal.status as 401);
    let principal: Principal | null;
    try {
      throttle.guard(c);
      const form = await c.req.parseBody().catch(() => ({}) as Record<string, unknown>);
      const token = typeof form.token === "string" ? form.token : "";
      principal = token === "" || token.length > 1000 ? null : await principalOf(c, token);
      if (!principal) {
        if (token !== "") await throttle.failed(c);
        return c.html(mounted(c, <Login error="Wrong token." />), 401);
      }
    } catch (error) {
      if (!(error instanceof ProblemError) || error.status !== 429) throw error;
      const retryAfter = error.headers["retry-after"];
      // the throttle's 429 always says when to come back; one that does not goes out as a problem
      if (retryAfter === undefined) throw error;
      return c.html(
        mounted(c, <Login error={`Too many failed logins from here; try again in ${retryAfter} s.`} />),
        429,
        {
          "retry-after": retryAfter,
        },
      );
    }
    // a valid token without the scope: refused, not counted as a failure
    if (!scopesAllow(principal.scopes, "read")) {
      return c.html(
        mounted(c, <Login error="This token cannot open the dashboard: it needs the read, operate or admin scope." />),
        403,
      );
    }
    if (!(await startSession(c, principal))) return c.html(mounted(c, <Login error="Wrong token." />), 401);
    return c.redirect(urlOf(c, "/"), 303);
  });

  app.post("/logout", async (c) => {
    await endSession(c);
    return c.redirect(urlOf(c, "/login"), 303);
  });

  // Everything below needs a session: pages send the browser to the login form. The session
  // acts with its token's scopes: pages need read, actions operate (a refusal is a 403 page).
  const requireSession = async (c: DashboardContext, next: () => Promise<void>) => {
    const principal = await sessionPrincipal(c);
    if (principal) {
      c.set("principal", principal);
      return next();
    }
    if (c.req.method === "GET") return c.redirect(urlOf(c, "/login"), 302);
    return c.html(mounted(c, <Login error="Your session has ended; log in again." />), 401);
  };
  app.get("/", requireSession);
  app.use("/ui/*", requireSession);
  const scope = (needed: TokenScope) => requireScope(needed, { refuse: forbiddenPage });

  app.get("/", scope("read"), (c) =>
    render(c, async (corq) => {
      const stats = await corq.stats();
      const throughput = await corq.throughput({ windowMs: 300_000, bucketMs: 10_000 });
      return (
        <Overview
          subscriptions={stats.subscriptions}
          log={stats.log}
          throughput={throughput}
          notice={noticeOf(c)}
          wakeUpsWaitForCron={wakeUpsFinding(c.env).length > 0}
        />
      );
    }),
  );

  app.get("/ui/subscriptions/:name", scope("read"), (c) =>
    render(c, async (corq) => {
      const name = parseOrThrow(subscriptionName, c.req.param("name"), "invalid_input", "name");
      const { status, after } = parseOrThrow(keysQuery, c.req.query(), "invalid_input", "query");
      const subscription = await corq.subscription(name);
      const { keys, next } = await corq.keyPage(name, { status, after, limit: KEYS_PER_PAGE });
      return (
        <Keys
          subscription={subscription}
          keys={keys}
          status={status}
          after={after}
          next={next}
          back={here(c)}
          notice={noticeOf(c)}
        />
      );
    }),
  );

  app.get("/ui/dead-letters", scope("read"), (c) =>
    render(c, async (corq) => {
      const { subscription } = parseOrThrow(subscriptionFilter, c.req.query(), "invalid_input", "query");
      const subscriptions: SubscriptionStats[] = subscription
        ? [await corq.subscription(subscription)]
        : (await corq.stats()).subscriptions;
      const deadLetters = await corq.deadLetters({ subscription, limit: 200, withEvent: true });
      return (
        <DeadLetters
          deadLetters={deadLetters}
          subscriptions={subscriptions}
          subscription={subscription}
          back={here(c)}
          notice={noticeOf(c)}
        />
      );
    }),
  );

  app.get("/ui/timeline", scope("read"), (c) =>
    render(c, async (corq) => {
      const { subscription, minutes } = parseOrThrow(timelineQuery, c.req.query(), "invalid_input", "query");
      const { subscriptions } = await corq.stats();
      const timeline = await corq.timeline({ subscription, sinceMs: minutes * 60_000, maxKeys: TIMELINE_KEYS });
      return (
        <TimelinePage
          timeline={timeline}
          subscriptions={subscriptions}
          subscription={subscription}
          minutes={minutes}
          now={Date.now()}
        />
      );
    }),
  );

  app.get("/ui/alerts", scope("read"), (c) =>
    render(c, async (corq) => {
      const principal = c.var.principal;
      const admin = principal !== undefined && scopesAllow(principal.scopes, "admin");
      const alerts = (await corq.alerts()).map((a) => (admin ? a : { ...a, url: redactedUrl(a.url) }));
      return <Alerts alerts={alerts} redacted={!admin} />;
    }),
  );

  app.get("/ui/streams", scope("read"), (c) => {
    const stream = c.req.query("stream");
    if (stream) return c.redirect(urlOf(c, `/ui/streams/${encodeURIComponent(stream)}`), 303);
    return render(c, async (corq) => {
      const { before } = parseOrThrow(tailQuery, c.req.query(), "invalid_input", "query");
      const { events, next } = await corq.logTail({ before, limit: EVENTS_PER_PAGE });
      return <LogTail events={events} before={before} next={next} />;
    });
  });

  app.get("/ui/streams/:stream", scope("read"), (c) =>
    render(c, async (corq) => {
      const stream = c.req.param("stream");
      const { from } = parseOrThrow(streamQuery, c.req.query(), "invalid_input", "query");
      const events = await corq.readStream(stream, { from, limit: EVENTS_PER_PAGE });
      return <Stream stream={stream} events={events} from={from} limit={EVENTS_PER_PAGE} />;
    }),
  );

  for (const action of actions) {
    app.post(`/ui/actions/${action}`, scope("operate"), (c) =>
      refusalsAsPages(c, async () => {
        const form = await c.req.parseBody().catch(() => {
          throw new CorqError("invalid_input", "send the form as application/x-www-form-urlencoded");
        });
        const { subscription, key, back, to } = parseOrThrow(actionForm, form, "invalid_input", "form");
        const origin = requestOrigin(c);
        const path = localPath(back ?? urlOf(c, "/"), { origin, basePath: c.var.basePath });
        if (path === null) {
          const under = c.var.basePath ? ` under ${c.var.basePath}` : "";
          throw new CorqError("invalid_input", `back: must be a path on this site${under}`);
        }
        const corq = c.var.corq();
        let count = 0;
        if (action === "pause" || action === "resume") {
          await corq[action](subscription);
          if (action === "resume") dispatchInBackground(c, options.subscriptions ?? [], "a resume");
        } else if (action === "pause-key" || action === "resume-key") {
          if (key === undefined) throw new CorqError("invalid_input", "key: required");
          await corq[action === "pause-key" ? "pauseKey" : "resumeKey"](subscription, key);
          if (action === "resume-key") dispatchInBackground(c, options.subscriptions ?? [], "a resume");
        } else if (action === "rewind") {
          if (to === undefined) throw new CorqError("invalid_input", "to: a position or beginning is required");
          count = (await corq.rewind(subscription, { to, key })).requeued;
          dispatchInBackground(c, options.subscriptions ?? [], "a rewind");
        } else count = (await corq.releaseDeadLetters({ subscription, key, mode: action })).released;
        const url = new URL(path, origin);
        const done = { done: action, count: String(count), of: subscription };
        for (const [name, value] of Object.entries(done)) url.searchParams.set(name, value);
        return c.redirect(url.pathname + url.search, 303);
      }),
    );
  }

  return app;
}

/** Renders a page (see refusalsAsPages); without the operate scope, with no action buttons. */
function render(c: DashboardContext, page: (corq: Corq) => Promise<HtmlEscapedString>) {
  const principal = c.var.principal;
  const canOperate = principal !== undefined && scopesAllow(principal.scopes, "operate");
  return refusalsAsPages(c, async () =>
    c.html(mounted(c, <CanOperate.Provider value={canOperate}>{await page(c.var.corq())}</CanOperate.Provider>)),
  );
}

/** A session without the scope a page or action needs: a 403 page, and nothing done. */
function forbiddenPage(c: DashboardContext, refusal: ProblemError): Response | Promise<Response> {
  return c.html(
    mounted(
      c,
      <Page title="Not allowed" section="overview" live={false}>
        <p class="error" role="alert">
          Not allowed: {refusal.message}. Log in with a token that has it.
        </p>
        <p>
          <a href={urlOf(c, "/")}>Back to the overview</a>
        </p>
      </Page>,
    ),
    403,
  );
}

/** A refusal (unknown subscription, bad query or form) becomes an HTML error page with its status, not problem+json. */
async function refusalsAsPages(c: DashboardContext, respond: () => Promise<Response>): Promise<Response> {
  try {
    return await respond();
  } catch (error) {
    if (!(error instanceof CorqError) || error.status >= 500) throw error;
    return c.html(
      mounted(
        c,
        <Page title="Error" section="overview" live={false}>
          <p class="error" role="alert">
            {error.message}
          </p>
          <p>
            <a href={urlOf(c, "/")}>Back to the overview</a>
          </p>
        </Page>,
      ),
      error.status as 400,
    );
  }
}
