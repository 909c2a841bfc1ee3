// corqueue/client: a typed client of corq's HTTP API (docs/http-api.md) for scripts, other
// services and the `corq` CLI. Only fetch: it runs in Node 18+, Workers, Deno and browsers,
// and imports nothing of the engine at run time.
import { CorqError } from "./errors.js";
import type {
  AlertCheck,
  AlertInfo,
  AlertInput,
  AppendResult,
  ConsumeResult,
  CreatedToken,
  DeadLetter,
  DoctorOptions,
  DoctorReport,
  EventInput,
  KeyState,
  KeyStatus,
  Retention,
  RetentionPolicy,
  RetentionRun,
  StoredEvent,
  SubscriptionStats,
  TokenInfo,
  TokenScope,
} from "./types.js";

export type {
  AlertCheck,
  AlertCondition,
  AlertInfo,
  AlertInput,
  AlertPayload,
  AlertSend,
  AppendResult,
  ConsumeResult,
  DeadLetter,
  EventInput,
  KeyState,
  KeyStatus,
  StoredEvent,
  SubscriptionStats,
  TokenInfo,
  TokenScope,
  CreatedToken,
  Retention,
  RetentionPolicy,
  RetentionRun,
  DoctorFinding,
  DoctorOptions,
  DoctorReport,
} from "./types.js";

export interface ClientOptions {
  /**
   * Where the API is: its origin (http://127.0.0.1:8787, https://corq.example.workers.dev), or
   * with the prefix it is mounted under (https://shop.example/corq: `basePath`), which every
   * path is put under.
   */
  url: string;
  /** Sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** Another fetch (a service binding's, a test's). */
  fetch?: (input: Request) => Promise<Response>;
}

/** An RFC 9457 problem, as every refusal of the API is. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  errors?: { path: string; message: string }[];
  [member: string]: unknown;
}

/** A refusal (4xx / 5xx) of the API; `problem` is its body. */
export class CorqHttpError extends Error {
  constructor(
    readonly status: number,
    readonly problem: Problem,
  ) {
    super(`${status} ${problem.title}: ${problem.detail}`);
    this.name = "CorqHttpError";
  }
}

export interface PushSubscriptionConfig {
  events?: string[];
  /** Stream-name prefixes (1–100): only events of streams that start with one of them. Default: every stream. */
  streams?: string[];
  key?: string;
  from?: "beginning" | "now";
  deliver: { url: string; timeoutMs?: number; secret?: string };
  batchSize?: number;
  maxAttempts?: number;
  backoff?: { initialMs?: number; maxMs?: number; factor?: number };
  leaseMs?: number;
  /** At most this many keys in flight at once, across every consumer (null or absent: no cap). */
  maxLeasedKeys?: number | null;
  /** Fairness between tenants: "stream" or a path such as "data.tenant" (null or absent: none). */
  tenant?: string | null;
  /** Keys per round by tenant (default 1). */
  tenantWeights?: Record<string, number> | null;
  /** At most this many keys of each tenant in flight at once (needs tenant; null or absent: no cap). */
  maxLeasedKeysPerTenant?: number | null;
  /**
   * No window of `perMs` sees more than `events` deliveries start for each key, tenant or the
   * subscription; `burst` (1..events, default 1) may start at once (null or absent: no limit).
   */
  rateLimit?: { events: number; perMs: number; by: "key" | "tenant" | "subscription"; burst?: number } | null;
  /** An event's delay above this many ms is capped at it for this subscription (0 to 366 days; absent: a day). */
  maxDelayMs?: number;
}

export interface Stats {
  subscriptions: SubscriptionStats[];
  /** `events` is counted up to 10,000 and estimated past that (`eventsEstimated`). */
  log: { head: number | null; events: number; eventsEstimated: boolean };
}

type Query = Record<string, string | number | undefined>;

export interface CorqClient {
  health(): Promise<{ ok: boolean; db: string }>;
  /**
   * `idempotencyKey` goes as the Idempotency-Key header: a retry with it answers the first
   * append (`replayed: true`, from the Idempotent-Replayed header) and writes nothing.
   */
  append(
    stream: string,
    events: EventInput[],
    options?: { expectedVersion?: number; idempotencyKey?: string },
  ): Promise<AppendResult>;
  readStream(
    stream: string,
    options?: { from?: number; limit?: number },
  ): Promise<{ stream: string; events: StoredEvent[]; erased?: true; version?: number }>;
  /** Erase the stream: its events leave the log and every queue; its version stays (admin). */
  eraseStream(stream: string): Promise<{ erased: number }>;
  readLog(options?: { after?: number; limit?: number }): Promise<{ events: StoredEvent[]; next: number | null }>;
  /** The newest events first, paged backwards: pass `next` as `before` (GET /events/tail). */
  logTail(options?: { before?: number; limit?: number }): Promise<{ events: StoredEvent[]; next: number | null }>;
  subscriptions(): Promise<{ subscriptions: SubscriptionStats[] }>;
  subscription(name: string): Promise<SubscriptionStats>;
  /** The secret is in the answer only when the subscription is created. */
  putSubscription(name: string, config: PushSubscriptionConfig): Promise<SubscriptionStats & { secret?: string }>;
  deleteSubscription(name: string): Promise<void>;
  keys(
    subscription: string,
    options?: { status?: KeyStatus; limit?: number; after?: string },
  ): Promise<{ keys: KeyState[]; next: string | null }>;
  pause(subscription: string): Promise<SubscriptionStats>;
  resume(subscription: string): Promise<SubscriptionStats>;
  /** One key: never claimed while paused (its events stay queued, in order). */
  pauseKey(subscription: string, key: string): Promise<KeyState>;
  resumeKey(subscription: string, key: string): Promise<KeyState>;
  /** Queue the events again from `to` (inclusive; "beginning"), the whole subscription or one key. */
  rewind(subscription: string, options: { to: number | "beginning"; key?: string }): Promise<{ requeued: number }>;
  deadLetters(options?: { subscription?: string; limit?: number }): Promise<{ deadLetters: DeadLetter[] }>;
  /** Without `key`: every dead key of the subscription. */
  releaseDeadLetters(options: {
    subscription: string;
    key?: string;
    mode?: "retry" | "skip";
  }): Promise<{ released: number }>;
  stats(): Promise<Stats>;
  advance(): Promise<{ advanced: Record<string, number> }>;
  /** One batch of one ready key; null when no key is ready. */
  consume(subscription: string): Promise<ConsumeResult | null>;
  /** The secret (`token`) is in this answer only. */
  createToken(input: { name: string; scopes: TokenScope[]; streamPrefix?: string | null }): Promise<CreatedToken>;
  tokens(): Promise<{ tokens: TokenInfo[] }>;
  revokeToken(id: string): Promise<void>;
  /** The retention policy and the horizon. */
  retention(): Promise<Retention>;
  /** Sets the retention policy (admin); `maxAgeMs: null` keeps the log forever. */
  setRetention(policy: RetentionPolicy): Promise<Retention>;
  /** One bounded retention pass now (admin). */
  runRetention(): Promise<RetentionRun>;
  /** What is wrong with corq's database and what to do (admin); `ok` false when a finding is an error. */
  doctor(options?: DoctorOptions): Promise<DoctorReport>;
  /** Creates or replaces an alert (admin); `secret` is in the answer only when it is created. */
  putAlert(name: string, input: AlertInput): Promise<AlertInfo & { secret?: string }>;
  /** Every alert with its counts and last send, never a secret (admin). */
  alerts(): Promise<{ alerts: AlertInfo[] }>;
  deleteAlert(name: string): Promise<void>;
  /** One alerts pass now (admin): what the cron and serve do by themselves. */
  checkAlerts(): Promise<AlertCheck>;
  openapi(): Promise<Record<string, unknown>>;
}

export function createClient(options: ClientOptions): CorqClient {
  const base = new URL(options.url);
  // "/corq" of https://host/corq/ (a relative "/health" would resolve to the host's root)
  const prefix = base.pathname.replace(/\/+$/, "");
  const send = options.fetch ?? ((request: Request) => fetch(request));

  async function call<T>(
    method: string,
    path: string,
    init: {
      body?: unknown;
      query?: Query;
      headers?: Record<string, string>;
      answered?: (response: Response) => void;
    } = {},
  ): Promise<T> {
    const url = new URL(`${prefix}${path}`, base.origin);
    for (const [name, value] of Object.entries(init.query ?? {})) {
      if (value !== undefined) url.searchParams.set(name, String(value));
    }
    const headers = new Headers({ accept: "application/json" });
    if (options.token) headers.set("authorization", `Bearer ${options.token}`);
    if (init.body !== undefined) headers.set("content-type", "application/json");
    for (const [name, value] of Object.entries(init.headers ?? {})) headers.set(name, value);
    const response = await send(
      new Request(url, { method, headers, body: init.body === undefined ? undefined : JSON.stringify(init.body) }),
    );
    const text = await response.text();
    if (!response.ok) throw new CorqHttpError(response.status, toProblem(response, text));
    init.answered?.(response);
    if (response.status === 204 || text === "") return undefined as T;
    return JSON.parse(text) as T;
  }

  // every method is async: a refusal before sending (segment) is a rejection, as the server's are
  return {
    health: async () => call("GET", "/health"),
    append: async (stream, events, appendOptions = {}) => {
      let replayed = false;
      const result = await call<AppendResult>("POST", `/streams/${segment(stream, "stream")}/events`, {
        body: { events, expectedVersion: appendOptions.expectedVersion },
        headers:
          appendOptions.idempotencyKey === undefined ? undefined : { "idempotency-key": appendOptions.idempotencyKey },
        answered: (response) => (replayed = response.headers.get("idempotent-replayed") === "true"),
      });
      return replayed ? { ...result, replayed: true } : result;
    },
    readStream: async (stream, readOptions = {}) =>
      call("GET", `/streams/${segment(stream, "stream")}`, { query: readOptions }),
    eraseStream: async (stream) => call("DELETE", `/streams/${segment(stream, "stream")}`),
    readLog: async (logOptions = {}) => call("GET", "/events", { query: logOptions }),
    logTail: async (tailOptions = {}) => call("GET", "/events/tail", { query: tailOptions }),
    subscriptions: async () => call("GET", "/subscriptions"),
    subscription: async (name) => call("GET", `/subscriptions/${segment(name, "subscription")}`),
    putSubscription: async (name, config) =>
      call("PUT", `/subscriptions/${segment(name, "subscription")}`, { body: config }),
    deleteSubscription: async (name) => call("DELETE", `/subscriptions/${segment(name, "subscription")}`),
    keys: async (subscription, keyOptions = {}) =>
      call("GET", `/subscriptions/${segment(subscription, "subscription")}/keys`, { query: keyOptions }),
    pause: async (subscription) => call("POST", `/subscriptions/${segment(subscription, "subscription")}/pause`),
    resume: async (subscription) => call("POST", `/subscriptions/${segment(subscription, "subscription")}/resume`),
    pauseKey: async (subscription, key) =>
      call("POST", `/subscriptions/${segment(subscription, "subscription")}/keys/${segment(key, "key")}/pause`),
    resumeKey: async (subscription, key) =>
      call("POST", `/subscriptions/${segment(subscription, "subscription")}/keys/${segment(key, "key")}/resume`),
    rewind: async (subscription, rewindOptions) =>
      call("POST", `/subscriptions/${segment(subscription, "subscription")}/rewind`, { body: rewindOptions }),
    deadLetters: async (deadOptions = {}) => call("GET", "/dead-letters", { query: deadOptions }),
    releaseDeadLetters: async (release) => call("POST", "/dead-letters/retry", { body: release }),
    stats: async () => call("GET", "/stats"),
    advance: async () => call("POST", "/advance"),
    consume: async (subscription) =>
      (await call<ConsumeResult | undefined>("POST", `/consume/${segment(subscription, "subscription")}`)) ?? null,
    createToken: async (input) => call("POST", "/tokens", { body: input }),
    tokens: async () => call("GET", "/tokens"),
    revokeToken: async (id) => call("DELETE", `/tokens/${segment(id, "id")}`),
    retention: async () => call("GET", "/retention"),
    setRetention: async (policy) => call("PUT", "/retention", { body: policy }),
    runRetention: async () => call("POST", "/retention/run"),
    doctor: async (doctorOptions = {}) => call("GET", "/doctor", { query: { heldOverMs: doctorOptions.heldOverMs } }),
    putAlert: async (name, input) => call("PUT", `/alerts/${segment(name, "alert")}`, { body: input }),
    alerts: async () => call("GET", "/alerts"),
    deleteAlert: async (name) => call("DELETE", `/alerts/${segment(name, "alert")}`),
    checkAlerts: async () => call("POST", "/alerts/check"),
    openapi: async () => call("GET", "/openapi.json"),
  };
}

/**
 * A path segment, percent-encoded. "", "." and ".." are refused before anything is sent: a URL
 * folds them into the path around them (pauseKey(subscription, "..") would name the subscription
 * itself: every key paused), and none of them can be a stream, subscription or key.
 */
function segment(value: string, what: string): string {
  if (value === "" || value === "." || value === "..") {
    throw new CorqError("invalid_input", `${what}: ${JSON.stringify(value)} cannot be a path segment`);
  }
  return encodeURIComponent(value);
}

/** The problem body, or one made up when a proxy in between answered with something else. */
function toProblem(response: Response, text: string): Problem {
  try {
    const body = JSON.parse(text) as Partial<Problem>;
    if (typeof body === "object" && body !== null && typeof body.type === "string") {
      return { title: response.statusText, detail: "", ...body, status: response.status } as Problem;
    }
  } catch {
    // not JSON: below
  }
  return {
    type: "about:blank",
    title: response.statusText || "Error",
    status: response.status,
    detail: text.slice(0, 500) || `HTTP ${response.status}`,
  };
}
