// The HTTP API's routes as the OpenAPI document describes them (openapi.ts builds it from this
// table): each route's method and path, the scope it needs, its input schemas and its answers,
// with the zod schemas api.ts validates with (apiSchemas.ts). test/openapi.test.ts fails when a
// route of the app is missing here (or one here is not in the app).
import { z } from "zod";
import * as s from "./apiSchemas.js";

/** The token scope a route needs (src/http/auth.ts, requireScope); the webhook also takes a signature. */
type Access = "public" | "append" | "read" | "operate" | "admin" | "operate or signature";

interface Answer {
  description: string;
  schema?: z.ZodType;
  /** The media type when it is not JSON (problem+json for refusals, application/json otherwise). */
  type?: string;
}

export interface ApiRoute {
  method: "get" | "post" | "put" | "delete";
  /** As Hono writes it: `/subscriptions/:name`. */
  path: string;
  summary: string;
  tag: "health" | "log" | "subscriptions" | "dead letters" | "pipeline" | "tokens" | "retention" | "alerts";
  access: Access;
  params?: z.ZodObject;
  query?: z.ZodObject;
  headers?: z.ZodObject;
  body?: z.ZodType;
  answers: Record<number, Answer>;
}

const noBody = (description: string): Answer => ({ description });
const unknownSubscription: Answer = { description: "no subscription by that name", schema: s.problem };

export const apiRoutes: ApiRoute[] = [
  {
    method: "get",
    path: "/health",
    summary: "Is the database reachable (no details to the public)",
    tag: "health",
    access: "public",
    answers: {
      200: { description: "up", schema: s.health },
      503: { description: "the database is unavailable", schema: s.problem },
    },
  },
  {
    method: "get",
    path: "/openapi.json",
    summary: "This document",
    tag: "health",
    access: "public",
    answers: { 200: { description: "OpenAPI 3.1", schema: z.record(z.string(), z.unknown()) } },
  },
  {
    method: "post",
    path: "/streams/:stream/events",
    summary: "Append events to a stream (then advance and dispatch in the background)",
    tag: "log",
    access: "append",
    params: s.streamParams,
    headers: s.appendHeaders,
    body: s.appendBody,
    answers: {
      201: {
        description:
          "appended; or, with an Idempotency-Key this caller used before on the stream, the first append's answer (Idempotent-Replayed: true)",
        schema: s.appendResult,
      },
      409: {
        description:
          "expectedVersion does not match (nothing written; currentVersion), or an append with the Idempotency-Key is in flight",
        schema: s.problem,
      },
      422: { description: "the Idempotency-Key was used with another body within the window", schema: s.problem },
    },
  },
  {
    method: "get",
    path: "/streams/:stream",
    summary: "A stream's events in version order",
    tag: "log",
    access: "read",
    params: s.streamParams,
    query: s.streamQuery,
    answers: { 200: { description: "the events from `from`", schema: s.streamEvents } },
  },
  {
    method: "delete",
    path: "/streams/:stream",
    summary: "Erase a stream: its events leave the log and every queue; its name and version stay (the tombstone)",
    tag: "log",
    access: "admin",
    params: s.streamParams,
    answers: {
      200: { description: "the events this call erased (0: already erased)", schema: s.erased },
      404: { description: "no stream by that name", schema: s.problem },
    },
  },
  {
    method: "get",
    path: "/events",
    summary: "The global log in the safe read order, after a position",
    tag: "log",
    access: "read",
    query: s.logQuery,
    answers: { 200: { description: "a page; `next` is the cursor to pass as `after`", schema: s.logPage } },
  },
  {
    method: "get",
    path: "/events/tail",
    summary: "The newest events of the log, newest first, paged backwards (for display: not the safe read order)",
    tag: "log",
    access: "read",
    query: s.tailQuery,
    answers: { 200: { description: "a page; `next` is the cursor to pass as `before`", schema: s.tailPage } },
  },
  {
    method: "get",
    path: "/subscriptions",
    summary: "Every subscription with its stats",
    tag: "subscriptions",
    access: "read",
    answers: { 200: { description: "the subscriptions", schema: s.subscriptionList } },
  },
  {
    method: "get",
    path: "/subscriptions/:name",
    summary: "One subscription with its stats",
    tag: "subscriptions",
    access: "read",
    params: s.nameParams,
    answers: { 200: { description: "the subscription", schema: s.subscription }, 404: unknownSubscription },
  },
  {
    method: "put",
    path: "/subscriptions/:name",
    summary: "Create or update a push subscription",
    tag: "subscriptions",
    access: "admin",
    params: s.nameParams,
    body: s.subscriptionBody,
    answers: {
      200: { description: "updated", schema: s.subscription },
      201: { description: "created; `secret` is shown this once", schema: s.createdSubscription },
      409: { description: "a subscription defined in code", schema: s.problem },
    },
  },
  {
    method: "delete",
    path: "/subscriptions/:name",
    summary: "Delete a push (or orphaned code) subscription with its queue",
    tag: "subscriptions",
    access: "admin",
    params: s.nameParams,
    answers: {
      204: noBody("deleted"),
      404: unknownSubscription,
      409: { description: "a subscription defined in code", schema: s.problem },
    },
  },
  {
    method: "get",
    path: "/subscriptions/:name/keys",
    summary: "A subscription's keys, by status",
    tag: "subscriptions",
    access: "read",
    params: s.nameParams,
    query: s.keysQuery,
    answers: {
      200: { description: "keys in key order after `after`; `next` is the cursor to the next page", schema: s.keyList },
      404: unknownSubscription,
    },
  },
  ...(["pause", "resume"] as const).map(
    (action): ApiRoute => ({
      method: "post",
      path: `/subscriptions/:name/${action}`,
      summary: action === "pause" ? "Stop handing out the subscription's keys" : "Hand them out again",
      tag: "subscriptions",
      access: "operate",
      params: s.nameParams,
      answers: { 200: { description: "the subscription", schema: s.subscription }, 404: unknownSubscription },
    }),
  ),
  ...(["pause", "resume"] as const).map(
    (action): ApiRoute => ({
      method: "post",
      path: `/subscriptions/:name/keys/:key/${action}`,
      summary:
        action === "pause"
          ? "Stop handing out one key (its events wait in order; a batch in flight finishes)"
          : "Hand the key out again",
      tag: "subscriptions",
      access: "operate",
      params: s.keyParams,
      answers: {
        200: { description: "the key", schema: s.keyState },
        404: { description: "no such subscription, or (resume) no such key", schema: s.problem },
      },
    }),
  ),
  {
    method: "post",
    path: "/subscriptions/:name/rewind",
    summary:
      "Deliver again, in log order, from a position or the beginning (the whole subscription or one key): new seqs, replay: true",
    tag: "subscriptions",
    access: "operate",
    params: s.nameParams,
    body: s.rewindBody,
    answers: {
      200: { description: "events queued again", schema: s.rewound },
      404: unknownSubscription,
      409: {
        description:
          "keyed by a function this Worker does not define; or `to` is below the retention horizon (retained_away, with `horizon`)",
        schema: s.problem,
      },
    },
  },
  {
    method: "get",
    path: "/dead-letters",
    summary: "Dead keys, newest first",
    tag: "dead letters",
    access: "read",
    query: s.deadLettersQuery,
    answers: { 200: { description: "the dead keys", schema: s.deadLetterList } },
  },
  {
    method: "post",
    path: "/dead-letters/retry",
    summary:
      "Release dead keys (retry or skip the failed event): a token with operate, or a Standard Webhooks signature",
    tag: "dead letters",
    access: "operate or signature",
    body: s.releaseBody,
    answers: {
      200: { description: "keys released", schema: s.released },
      404: unknownSubscription,
      409: { description: "a webhook-id already acted on (replay)", schema: s.problem },
    },
  },
  {
    method: "get",
    path: "/stats",
    summary: "Every subscription's stats and the log's head",
    tag: "subscriptions",
    access: "read",
    answers: { 200: { description: "stats", schema: s.stats } },
  },
  {
    method: "get",
    path: "/metrics",
    summary:
      "Prometheus text format 0.0.4: per subscription lag, pending, keys by state, acked events, batch durations (docs/http-api.md)",
    tag: "health",
    access: "read",
    answers: { 200: { description: "Prometheus text", schema: z.string(), type: "text/plain" } },
  },
  {
    method: "get",
    path: "/doctor",
    summary:
      "What is wrong with corq's database and what to do: a held xmin horizon, the schema, subscriptions, vacuum, connections (docs/operations.md)",
    tag: "health",
    access: "admin",
    query: s.doctorQuery,
    answers: { 200: { description: "the findings; ok: none is an error", schema: s.doctorReport } },
  },
  {
    method: "post",
    path: "/advance",
    summary: "Move the log into the subscriptions' queues now",
    tag: "pipeline",
    access: "admin",
    answers: { 200: { description: "events enqueued per subscription", schema: s.advanced } },
  },
  {
    method: "post",
    path: "/dispatch",
    summary: "What the cron does: advance, then start consumer invocations",
    tag: "pipeline",
    access: "admin",
    headers: s.dispatchHeaders,
    answers: {
      200: { description: "what was advanced and dispatched", schema: s.dispatched },
      202: {
        description:
          "with corq-after-horizon: the horizon passed (or the wait gave up); with corq-wake-up: at once. Advance and dispatch follow",
        schema: s.horizonRetry,
      },
    },
  },
  {
    method: "post",
    path: "/consume/:subscription",
    summary: "Claim one ready key and handle one batch of it (or drain for corq-budget-ms)",
    tag: "pipeline",
    access: "admin",
    params: s.consumeParams,
    headers: s.consumeHeaders,
    answers: {
      200: { description: "the batch's outcome", schema: s.consumed },
      204: noBody("no key is ready"),
      404: unknownSubscription,
    },
  },
  {
    method: "post",
    path: "/tokens",
    summary: "Create a scoped token (the secret is in this answer only)",
    tag: "tokens",
    access: "admin",
    body: s.tokenBody,
    answers: { 201: { description: "created", schema: s.createdToken } },
  },
  {
    method: "get",
    path: "/tokens",
    summary: "Every token, never its secret",
    tag: "tokens",
    access: "admin",
    answers: { 200: { description: "the tokens", schema: s.tokenList } },
  },
  {
    method: "delete",
    path: "/tokens/:id",
    summary: "Revoke a token: refused (401) from the next request on",
    tag: "tokens",
    access: "admin",
    params: s.tokenParams,
    answers: {
      204: noBody("revoked"),
      404: { description: "no such token (or revoked already)", schema: s.problem },
    },
  },
  {
    method: "get",
    path: "/retention",
    summary: "The retention policy and the horizon",
    tag: "retention",
    access: "read",
    answers: { 200: { description: "the policy in force", schema: s.retention } },
  },
  {
    method: "put",
    path: "/retention",
    summary:
      "Set the retention policy (in force until a deploy changes its own option); maxAgeMs null keeps the log forever",
    tag: "retention",
    access: "admin",
    body: s.retentionBody,
    answers: { 200: { description: "the policy now in force", schema: s.retention } },
  },
  {
    method: "post",
    path: "/retention/run",
    summary:
      "One retention pass now, bounded (CORQ_RETENTION_CHUNKS chunks, 10 s); the cron and serve run passes by themselves",
    tag: "retention",
    access: "admin",
    answers: { 200: { description: "what the pass removed", schema: s.retentionRun } },
  },
  {
    method: "get",
    path: "/alerts",
    summary: "Every alert with its counts and last send, never its secret",
    tag: "alerts",
    access: "admin",
    answers: { 200: { description: "the alerts", schema: s.alertList } },
  },
  {
    method: "put",
    path: "/alerts/:name",
    summary:
      "Create or replace an alert: a signed POST when a key dies, a subscription lags, an advance fails or the xmin horizon is held (docs/operations.md)",
    tag: "alerts",
    access: "admin",
    params: s.alertParams,
    body: s.alertBody,
    answers: {
      200: { description: "replaced (the secret kept unless a new one was given)", schema: s.alert },
      201: { description: "created; `secret` is shown this once", schema: s.createdAlert },
    },
  },
  {
    method: "delete",
    path: "/alerts/:name",
    summary: "Delete an alert (what it had yet to send is not sent)",
    tag: "alerts",
    access: "admin",
    params: s.alertParams,
    answers: { 204: noBody("deleted"), 404: { description: "no alert by that name", schema: s.problem } },
  },
  {
    method: "post",
    path: "/alerts/check",
    summary:
      "One alerts pass now: evaluate, record, send what is due (within this invocation's subrequests); the cron and serve run passes by themselves",
    tag: "alerts",
    access: "admin",
    answers: { 200: { description: "what the pass sent", schema: s.alertCheck } },
  },
];
