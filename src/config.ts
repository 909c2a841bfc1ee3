// Validation at the library boundary. Everything a caller hands corq is parsed here first,
// so bad input raises CorqError("invalid_input" | "invalid_config") before any write.
import { z } from "zod";
import { CorqError } from "./errors.js";
import type { EventInput, Handler, Json, KeyFunction, SubscriptionDefinition } from "./types.js";
import { defaultTimeoutMs, deliverConfig } from "./pushDelivery.js";
import { privateHostProblem } from "./privateAddress.js";
import { parseValidators, type Validators } from "./eventSchemas.js";

const streamNamePattern = /^[A-Za-z0-9_][A-Za-z0-9_.:@+=-]{0,199}$/;

export const streamName = z.string().regex(streamNamePattern, "1-200 characters: letters, digits and _ . : @ + = -");

/**
 * A subscription's stream filter: stream-name prefixes, each what a stream name may begin with.
 * Matched as exact prefixes (`starts_with`, never LIKE: `_` is a stream-name character), so a
 * pattern character such as `*` or `%` could never match and is refused rather than ignored.
 */
export const MAX_STREAM_PREFIXES = 100;
export const streamPrefixes = z
  .array(
    z
      .string()
      .regex(
        streamNamePattern,
        'a stream-name prefix: 1-200 characters: letters, digits and _ . : @ + = -, not starting with . : @ + = -; no wildcards ("orders-" takes every stream that starts with it)',
      ),
  )
  .min(1, "at least one prefix (leave streams out for every stream)")
  .max(MAX_STREAM_PREFIXES, `at most ${MAX_STREAM_PREFIXES} prefixes`)
  .describe(
    `only events of streams whose name starts with one of these prefixes (exact prefixes, no wildcards; 1-${MAX_STREAM_PREFIXES}); left out: every stream`,
  );

export const eventName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_.:-]{0,199}$/, "1-200 characters: a letter or _, then letters, digits and _ . : -");

export const subscriptionName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/, "1-100 characters: letters, digits and _ . -");

export const MAX_JSON_DEPTH = 64;
// biome-ignore lint/suspicious/noControlCharactersInRegex: U+0000 is what jsonb refuses; this finds it
const badText = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Why `value` is not JSON that Postgres jsonb can store, or null. Walks iteratively: event
 * data nested 5,000 levels deep must be a 400, not a stack overflow (zod's z.json()
 * recurses). jsonb refuses U+0000 and lone surrogates: refused here, before any write.
 */
export function jsonProblem(value: unknown): string | null {
  const stack: [unknown, number][] = [[value, 1]];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const [item, depth] = next;
    if (item === null || typeof item === "boolean") continue;
    if (typeof item === "number") {
      if (!Number.isFinite(item)) return "numbers must be finite";
      continue;
    }
    if (typeof item === "string") {
      if (badText.test(item)) return "must not contain U+0000 or a lone surrogate";
      continue;
    }
    if (
      typeof item !== "object" ||
      (!Array.isArray(item) && Object.getPrototypeOf(item) !== Object.prototype && Object.getPrototypeOf(item) !== null)
    ) {
      return "must be JSON";
    }
    if (depth > MAX_JSON_DEPTH) return `nested deeper than ${MAX_JSON_DEPTH} levels`;
    if (Array.isArray(item)) {
      for (const element of item) stack.push([element, depth + 1]);
    } else {
      for (const [key, element] of Object.entries(item)) {
        if (badText.test(key)) return "must not contain U+0000 or a lone surrogate";
        stack.push([element, depth + 1]);
      }
    }
  }
  return null;
}

const storableJson = z.unknown().transform((value, ctx) => {
  const problem = value === undefined ? "required" : jsonProblem(value);
  if (problem) {
    ctx.addIssue({ code: "custom", message: problem });
    return z.NEVER;
  }
  return value as Json;
});

/**
 * "Come back later" answers (a handler's retryAfterMs, a receiver's 429/503 with Retry-After)
 * for one batch: at most this many, over at most MAX_POSTPONED_MS since the first, each at most
 * MAX_RETRY_AFTER_MS. Past either bound the next one fails the batch as an ordinary attempt (so
 * a receiver that answers 429 forever still ends in the dead letters, with that reason).
 */
export const MAX_POSTPONEMENTS = 100;
export const MAX_POSTPONED_MS = 24 * 60 * 60 * 1000;
export const MAX_RETRY_AFTER_MS = 60 * 60 * 1000;

/** How far ahead an event may be delayed (deliverAt / delayMs): 366 days. */
export const MAX_DELAY_MS = 366 * 24 * 60 * 60 * 1000;
/**
 * A subscription's cap on an event's delay unless it says otherwise (maxDelayMs): a day. A key
 * reachable through several stream prefixes can be delayed by a producer of any of them; by
 * default such a key waits a day at most (issue 47; schema default of subscriptions.max_delay_ms).
 */
export const DEFAULT_MAX_DELAY_MS = 24 * 60 * 60 * 1000;

// ISO 8601 with a date, a time and an offset (Z or ±hh:mm): a time without its zone would be
// read in the database session's zone
const deliverAtOf = <T extends z.ZodType<string | Date>>(input: T) =>
  input.transform((at, ctx) => {
    const ms = at instanceof Date ? at.getTime() : Date.parse(at);
    if (!Number.isFinite(ms)) {
      ctx.addIssue({ code: "custom", message: "must be a valid date" });
      return z.NEVER;
    }
    if (ms > Date.now() + MAX_DELAY_MS) {
      ctx.addIssue({ code: "custom", message: "must be at most 366 days ahead" });
      return z.NEVER;
    }
    return new Date(ms).toISOString();
  });
const isoTime = z.iso
  .datetime({ offset: true })
  .describe("not delivered before this time (ISO 8601 with an offset; a past time delivers at once)");
const delayMs = z
  .number()
  .int()
  .min(0)
  .max(MAX_DELAY_MS, "must be at most 366 days (31,622,400,000 ms)")
  .describe("not delivered before this many milliseconds after the append");

// strict: an unknown field (a typo such as "metadata") is refused, as on subscriptions.
// `at`: how deliverAt may be given (HTTP: text only; the library also takes a Date)
const eventInputOf = <T extends z.ZodType<string | Date>>(at: T) =>
  z
    .strictObject({
      name: eventName,
      data: storableJson,
      meta: storableJson
        .refine((meta) => typeof meta === "object" && meta !== null && !Array.isArray(meta), "must be an object")
        .optional(),
      deliverAt: deliverAtOf(at).optional(),
      delayMs: delayMs.optional(),
    })
    .refine((event) => event.deliverAt === undefined || event.delayMs === undefined, {
      message: "give deliverAt or delayMs, not both",
      path: ["delayMs"],
    });
/** An event as POST /streams/:stream/events takes it. */
export const eventInput = eventInputOf(isoTime);
/** An event as append() takes it: deliverAt may also be a Date. */
const libraryEventInput = eventInputOf(z.union([isoTime, z.date()]));

/** The largest value of an int4 column (a stream's version). */
export const INT4_MAX = 2_147_483_647;
export const expectedVersion = z.number().int().min(-1).max(INT4_MAX);

/**
 * A correlation key: the stream, or a JSON path into data/meta (`data.roomId`, `meta.tenant`).
 * Bounded: the advance walks the path for every event it scans (`#>>`), and a 300,000-segment
 * path made one advance statement run ~115 s, holding back every subscription. The path is
 * ASCII, so its length is its size in bytes.
 */
export const MAX_KEY_PATH_SEGMENTS = 32;
export const MAX_KEY_PATH_BYTES = 512;
export const keyPath = z
  .string()
  .max(MAX_KEY_PATH_BYTES, `must be at most ${MAX_KEY_PATH_BYTES} bytes`)
  .regex(
    /^(stream|(data|meta)(\.[A-Za-z0-9_-]+)+)$/,
    'must be "stream" or a path such as "data.roomId" or "meta.tenant"',
  )
  .refine(
    (path) => path.split(".").length <= MAX_KEY_PATH_SEGMENTS,
    `must have at most ${MAX_KEY_PATH_SEGMENTS} segments ("data.room.id" has 3)`,
  )
  .describe(
    `"stream", or a JSON path into data or meta: at most ${MAX_KEY_PATH_SEGMENTS} segments ("data.room.id" has 3) and ${MAX_KEY_PATH_BYTES} bytes`,
  );

/**
 * The key rule, one for every correlation key: non-empty, well-formed UTF-8 (no U+0000, no
 * lone surrogate), not "." or "..", at most 512 UTF-8 bytes. An event whose computed key
 * breaks it is skipped (counted, with the reason) — never a stalled advance. The advance of
 * stream and JSON-path keys checks the same rule in SQL (advanceSubscription.ts); text and
 * jsonb cannot hold U+0000 or lone surrogates, so only the other three apply there.
 */
export const MAX_KEY_BYTES = 512;
export const keyReasons = {
  empty: "key is empty",
  dots: 'key is "." or ".."',
  long: `key is longer than ${MAX_KEY_BYTES} bytes`,
  malformed: "key contains U+0000 or a lone surrogate",
} as const;

/** The same rule for a key's tenant (CLARIFICATIONS: "the same rule for tenant values"), in its words. */
export const tenantReasons: Record<keyof typeof keyReasons, string> = {
  empty: "tenant is empty",
  dots: 'tenant is "." or ".."',
  long: `tenant is longer than ${MAX_KEY_BYTES} bytes`,
  malformed: "tenant contains U+0000 or a lone surrogate",
};

/** Why `key` (or a tenant, with tenantReasons) breaks the key rule, or null when it keeps it. */
export function keyProblem(key: string, reasons: Record<keyof typeof keyReasons, string> = keyReasons): string | null {
  if (key === "") return reasons.empty;
  if (key === "." || key === "..") return reasons.dots;
  if (badText.test(key)) return reasons.malformed;
  if (new TextEncoder().encode(key).length > MAX_KEY_BYTES) return reasons.long;
  return null;
}

/** A key named by a caller (release, key-level endpoints): it must keep the key rule. */
export const correlationKey = z.string().superRefine((key, ctx) => {
  const problem = keyProblem(key);
  if (problem) ctx.addIssue({ code: "custom", message: problem });
});

export type KeyStrategy =
  | { kind: "stream" }
  | { kind: "path"; column: "data" | "meta"; path: string[] }
  | { kind: "function"; fn: KeyFunction };

export function parseKey(key: string | KeyFunction | undefined): KeyStrategy {
  if (typeof key === "function") return { kind: "function", fn: key };
  const spec = keyPath.parse(key ?? "stream");
  if (spec === "stream") return { kind: "stream" };
  const [column, ...path] = spec.split(".");
  return { kind: "path", column: column as "data" | "meta", path };
}

/** The stored text form of a key strategy. */
export function keyText(strategy: KeyStrategy): string {
  if (strategy.kind === "function") return "function";
  if (strategy.kind === "stream") return "stream";
  return [strategy.column, ...strategy.path].join(".");
}

/** `rateLimit` (docs/flow-control.md): decided in the database (corq.rate_take). */
const rateLimit = z
  .object({
    events: z.number().int().min(1).max(1_000_000),
    perMs: z.number().int().min(1).max(86_400_000),
    by: z.enum(["key", "tenant", "subscription"]),
    burst: z
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .default(1)
      .describe("events that may start at once (1..events, default 1: one every perMs / events)"),
  })
  .strict()
  .refine((r) => r.events <= r.perMs * 1000, "at most 1,000 events per millisecond")
  .refine((r) => r.burst <= r.events, { path: ["burst"], message: "a burst is at most the limit's events" })
  .describe(
    "no window of `perMs` sees more than `events` deliveries start (with a burst b: b of them at once), for each key, each tenant or the whole subscription",
  );

/** `tenantWeights`: a tenant with weight n gets n keys per round of the fair pick (default 1). */
const tenantWeights = z
  .record(correlationKey, z.number().int().min(1).max(1000))
  .refine((w) => Object.keys(w).length <= 1000, "at most 1000 tenants may have a weight")
  .describe("keys per round for a tenant (default 1), by tenant");

const backoff = z
  .object({
    initialMs: z.number().int().min(0).max(86_400_000).default(1000),
    maxMs: z.number().int().min(0).max(86_400_000).default(300_000),
    factor: z.number().min(1).max(10).default(2),
  })
  .refine((b) => b.maxMs >= b.initialMs, "maxMs must be >= initialMs");

/** Settings shared by code and push subscriptions (the stored part of a subscription). */
export const subscriptionSettings = z.object({
  name: subscriptionName,
  events: z
    .array(z.union([eventName, z.literal("*")]))
    .min(1)
    .max(1000)
    .default(["*"]),
  key: z.union([keyPath, z.custom<KeyFunction>((v) => typeof v === "function")]).default("stream"),
  streams: streamPrefixes.optional(),
  from: z.enum(["beginning", "now"]).default("beginning"),
  batchSize: z.number().int().min(1).max(1000).default(100),
  maxAttempts: z.number().int().min(1).max(1000).default(5),
  leaseMs: z.number().int().min(10).max(3_600_000).default(30_000),
  backoff: backoff.default({ initialMs: 1000, maxMs: 300_000, factor: 2 }),
  // at most this many keys leased at once across every consumer (docs/flow-control.md); null: no cap
  maxLeasedKeys: z.number().int().min(1).max(100_000).nullable().default(null),
  // fairness between tenants (docs/flow-control.md): each key's tenant, like `key`; null: none
  tenant: z
    .union([keyPath, z.custom<KeyFunction>((v) => typeof v === "function")])
    .nullable()
    .default(null),
  tenantWeights: tenantWeights.nullable().default(null),
  // at most this many keys of each tenant leased at once (docs/flow-control.md); null: no cap
  maxLeasedKeysPerTenant: z.number().int().min(1).max(100_000).nullable().default(null),
  // no window of `perMs` sees more than `events` deliveries start (burst b: b of them at once) for each key, tenant or the subscription; null: none
  rateLimit: rateLimit.nullable().default(null),
  // an event's delay above this is capped at it for this subscription, when advanced (docs/flow-control.md)
  maxDelayMs: z
    .number()
    .int()
    .min(0)
    .max(MAX_DELAY_MS, "must be at most 366 days (31,622,400,000 ms)")
    .default(DEFAULT_MAX_DELAY_MS)
    .describe("an event's delay above this is capped at it for this subscription (default a day)"),
});

/** The settings that need a tenant have one (applied to code and push settings alike). */
function tenantSettingsHold(
  s: {
    key: unknown;
    tenant: unknown;
    tenantWeights: unknown;
    maxLeasedKeysPerTenant: number | null;
    rateLimit: { by: string } | null;
  },
  ctx: z.RefinementCtx,
) {
  if (s.tenantWeights !== null && s.tenant === null)
    ctx.addIssue({ code: "custom", path: ["tenantWeights"], message: "tenantWeights needs a tenant" });
  if (s.maxLeasedKeysPerTenant !== null && s.tenant === null)
    ctx.addIssue({
      code: "custom",
      path: ["maxLeasedKeysPerTenant"],
      message: "maxLeasedKeysPerTenant needs a tenant",
    });
  if (s.rateLimit?.by === "tenant" && s.tenant === null)
    ctx.addIssue({ code: "custom", path: ["rateLimit", "by"], message: 'a rate limit by "tenant" needs a tenant' });
  // a tenant computed in JS is computed where the key is: by the advance's function path
  if (typeof s.tenant === "function" && typeof s.key !== "function")
    ctx.addIssue({
      code: "custom",
      path: ["tenant"],
      message: "a tenant function needs a key function too (or name the tenant by a path such as data.tenant)",
    });
}

/** A code subscription's settings (defineSubscription / createCorq's `subscriptions`). */
const codeSubscriptionSettings = subscriptionSettings.superRefine(tenantSettingsHold);

/** PUT /subscriptions/:name — a push subscription (the name comes from the path). */
export const pushSubscriptionInput = subscriptionSettings
  .omit({ name: true, key: true })
  .extend({ key: keyPath.default("stream"), tenant: keyPath.nullable().default(null), deliver: deliverConfig })
  .strict()
  .superRefine(tenantSettingsHold)
  .transform((s) => ({
    ...s,
    deliver: { ...s.deliver, timeoutMs: s.deliver.timeoutMs ?? defaultTimeoutMs(s.leaseMs) },
  }))
  .refine((s) => s.leaseMs > s.deliver.timeoutMs, {
    message: "leaseMs must be longer than deliver.timeoutMs (a lease must outlive its delivery)",
    path: ["leaseMs"],
  });

/**
 * A PUT body, parsed. Unless private networks are allowed, a URL whose text alone names a
 * destination that is not public (localhost, a private literal IP) is refused here already;
 * names are checked by the address they resolve to, when delivering (pushTransport.ts).
 */
export function parsePushSubscription(input: unknown, options: { allowPrivate: boolean }) {
  const settings = parseOrThrow(pushSubscriptionInput, input, "invalid_config", "subscription");
  const problem = options.allowPrivate ? null : privateHostProblem(new URL(settings.deliver.url));
  if (problem) {
    const message = `${problem}; set CORQ_PUSH_ALLOW_PRIVATE=true (or pushAllowPrivate) to deliver to private networks`;
    throw new CorqError("invalid_config", `subscription.deliver.url: ${message}`, {
      details: [{ path: "subscription.deliver.url", message }],
    });
  }
  return settings;
}

export type RateLimit = z.output<typeof rateLimit>;

export interface Subscription {
  name: string;
  events: string[]; // ["*"] = all
  /** Stream-name prefixes; null = every stream. */
  streams: string[] | null;
  key: KeyStrategy;
  from: "beginning" | "now";
  batchSize: number;
  maxAttempts: number;
  leaseMs: number;
  backoff: { initialMs: number; maxMs: number; factor: number };
  maxLeasedKeys: number | null;
  /** Each key's tenant (fairness); null: none. */
  tenant: KeyStrategy | null;
  tenantWeights: Record<string, number> | null;
  maxLeasedKeysPerTenant: number | null;
  rateLimit: RateLimit | null;
  /** An event's delay above this is capped at it for this subscription (at advance). */
  maxDelayMs: number;
  /** The handler's writes commit with the ack (SubscriptionDefinition.transactional). */
  transactional: boolean;
  /** Its schemas by event name (SubscriptionDefinition.schemas): null when it has none. */
  validators: Validators | null;
  handle: Handler;
}

export function parseSubscriptions(definitions: SubscriptionDefinition[]): Map<string, Subscription> {
  const parsed = new Map<string, Subscription>();
  for (const [index, definition] of definitions.entries()) {
    const settings = parseOrThrow(codeSubscriptionSettings, definition, "invalid_config", `subscriptions[${index}]`);
    if (typeof definition.handle !== "function") {
      throw new CorqError("invalid_config", `subscriptions[${index}].handle must be a function`);
    }
    const transactional = parseOrThrow(
      z.boolean().default(false),
      definition.transactional,
      "invalid_config",
      `subscriptions[${index}].transactional`,
    );
    if (parsed.has(settings.name)) {
      throw new CorqError("invalid_config", `subscription "${settings.name}" is defined twice`);
    }
    const events = settings.events.includes("*") ? ["*"] : [...new Set(settings.events)];
    parsed.set(settings.name, {
      ...settings,
      events,
      streams: uniqueStreams(settings.streams),
      key: parseKey(settings.key),
      tenant: settings.tenant === null ? null : parseKey(settings.tenant),
      transactional,
      validators: parseValidators(definition.schemas, { events, label: `subscriptions[${index}]` }),
      handle: definition.handle,
    });
  }
  return parsed;
}

/** A parsed stream filter as stored: each prefix once, in the order given; null for every stream. */
export function uniqueStreams(streams: string[] | undefined): string[] | null {
  return streams === undefined ? null : [...new Set(streams)];
}

// made once: building a zod schema costs more than parsing one event with it (it was the
// largest zod cost of an append over HTTP: bench/serveProbe.ts --profile)
const eventsInput = z.array(libraryEventInput).min(1).max(10_000);

export function parseEvents(input: unknown): EventInput[] {
  return parseOrThrow(eventsInput, input, "invalid_input", "events") as EventInput[];
}

/** zod parse that throws CorqError with every issue listed (path: message). */
export function parseOrThrow<T extends z.ZodType>(
  schema: T,
  input: unknown,
  code: "invalid_input" | "invalid_config",
  label: string,
): z.output<T> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const issues = result.error.issues.map((issue) => ({
    path: [...(label ? [label] : []), ...issue.path.map(String)].join("."),
    message: issue.message,
  }));
  throw new CorqError(code, issues.map((i) => `${i.path}: ${i.message}`).join("; "), { details: issues });
}
