// The public shapes of the library (README, "The library").
import type { SQL } from "drizzle-orm";
import type { Corq } from "./corq.js";
import type { TokenScope } from "./tokens.js";
import type { CorqTransaction } from "./db/drizzleTransaction.js";

export type { TokenScope, CorqTransaction };

export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

export interface EventInput {
  name: string;
  data: Json;
  meta?: Record<string, Json>;
}

/** An event as stored in the log. */
export interface StoredEvent {
  position: number;
  stream: string;
  version: number;
  name: string;
  data: Json;
  meta: Record<string, Json>;
  createdAt: string; // ISO 8601
}

/**
 * An event as a handler (or a push receiver) gets it: with its `seq`, the number of its queue
 * entry within (subscription, key) — 1, 2, 3 … in log order, never reused — so "seq <= last
 * seen" drops true duplicates. `replay`: queued again by a rewind (with a new, higher seq).
 */
export interface DeliveredEvent extends StoredEvent {
  seq: number;
  replay: boolean;
}

/** Computes the correlation key of an event in JS; null/undefined = the event does not match. */
export type KeyFunction = (event: StoredEvent) => string | null | undefined;

export interface HandlerContext {
  subscription: string;
  /** Changes when the subscription is deleted and created again: seqs of two incarnations are unrelated. */
  incarnation: string;
  key: string;
  /** 1 on the first delivery of this batch's head event, then 2, 3 … */
  attempt: number;
  /** Aborted when the lease expires: stop work you can stop. */
  signal: AbortSignal;
  /** The corq instance that claimed the batch: policies and process managers append with it. */
  corq: Corq;
  /**
   * Runs one statement (drizzle `sql` template) on corq's connection: projections write with it.
   * In a transactional subscription it runs in the batch's transaction, as `tx` does.
   */
  run<T = Record<string, unknown>>(query: SQL): Promise<T[]>;
  /**
   * Only in a `transactional: true` subscription (always there): the batch's transaction, a
   * drizzle transaction. What the handler writes with it commits in the same transaction as the
   * ack of the batch, fenced by the lease — or not at all: a handler that throws, or a lease lost
   * meanwhile, rolls it back (README, "Transactional handlers").
   */
  tx?: CorqTransaction;
}

/** The context of a transactional handler: `tx` is always there (annotate `ctx` with it, or write `ctx.tx!`). */
export interface TransactionalHandlerContext extends HandlerContext {
  tx: CorqTransaction;
}

/**
 * Receives the events of ONE key, ascending seq order (log order; replays after what was
 * queued before the rewind). Return nothing to ack the batch,
 * `{ ackedThrough: position }` to ack a prefix (the rest is delivered again, in order),
 * or throw to fail it (retried with backoff, dead after maxAttempts).
 */
export type Handler = (
  events: DeliveredEvent[],
  context: HandlerContext,
) => Promise<void | { ackedThrough: number }> | void | { ackedThrough: number };

export interface SubscriptionDefinition {
  name: string;
  events?: string[];
  key?: string | KeyFunction;
  from?: "beginning" | "now";
  batchSize?: number;
  maxAttempts?: number;
  leaseMs?: number;
  backoff?: { initialMs?: number; maxMs?: number; factor?: number };
  /**
   * The handler's writes through `ctx.tx` (and `ctx.run`) commit in the same transaction as the
   * ack of its batch: effects exactly once. Each such batch holds one connection (on Workers and
   * with driver "neon-http": a session opened for it) from the handler's start to its commit.
   * Default false: the handler runs outside any transaction and corq holds nothing open.
   */
  transactional?: boolean;
  handle: Handler;
}

export interface AppendResult {
  stream: string;
  /** The stream's last version after the append. */
  version: number;
  /** The global position of each appended event, in input order. */
  positions: number[];
}

/**
 * "expired": the lease ran out before the outcome was recorded; nothing changed, the batch comes again.
 * "released": a drain was aborted (a graceful stop) and the handler gave up: the lease was given
 * back at once and the batch comes again, no attempt counted.
 */
export type Outcome = "acked" | "retry" | "dead" | "expired" | "released";

export interface ConsumeResult {
  key: string;
  /** Number of events handed to the handler. */
  events: number;
  outcome: Outcome;
  error?: string;
}

export type KeyStatus = "ready" | "leased" | "backoff" | "dead" | "paused" | "idle";

export interface KeyState {
  key: string;
  status: KeyStatus;
  pending: number;
  attempts: number;
  availableAt: string | null;
  lastError: string | null;
  lastPosition: number | null;
  /** The last seq given to an event of this key (the next one queued gets seq + 1). */
  seq: number;
  /** When the key was paused (only while it is). */
  pausedSince?: string;
  /** Only while a lease is live: who holds it (a process, a Worker invocation), since and until when. */
  holder?: string | null;
  leasedSince?: string | null;
  leasedUntil?: string | null;
  /** Why the key is not running (or what it is doing), in words. */
  reason: string;
}

export interface SubscriptionStats {
  name: string;
  kind: "code" | "push";
  events: string[];
  key: string;
  from: "beginning" | "now";
  batchSize: number;
  maxAttempts: number;
  leaseMs: number;
  backoff: { initialMs: number; maxMs: number; factor: number };
  /** Push subscriptions: where batches are POSTed (the secret is never shown again). */
  deliver?: { url: string; timeoutMs: number };
  paused: boolean;
  watermark: number;
  lag: number;
  pending: number;
  /** Matching events without a valid key (none, or one that breaks the key rule): never queued. */
  skipped: number;
  /** Of those, the events whose key broke the key rule (empty, "." / "..", over 512 bytes, malformed, or a key function that threw). */
  skippedInvalidKeys: number;
  /** The last event skipped for an invalid key, and why. */
  lastSkip: { position: number; reason: string } | null;
  /** Failed events an operator skipped (dead letters released with mode "skip"). */
  skippedDeadLetters: number;
  /** Why the last advance of this subscription failed; null once an advance works again. */
  advanceError: { message: string; at: string } | null;
  /** A code subscription that the instance answering does not define (its code is gone): it can be deleted. */
  orphaned: boolean;
  keys: { ready: number; leased: number; backoff: number; dead: number; paused: number };
  /** Changes when the subscription is deleted and created again (deliveries carry it with each batch). */
  incarnation: string;
  oldestPendingAgeMs: number | null;
}

export interface DeadLetter {
  subscription: string;
  key: string;
  position: number | null;
  attempts: number;
  lastError: string | null;
  deadAt: string;
  /** Only with `withEvent`: the event that failed (null if it no longer exists). */
  event?: { stream: string; name: string; data: unknown } | null;
}

/** One batch in the activity record (Corq.activity): what the dashboard's timeline draws. */
export interface BatchRecord {
  subscription: string;
  key: string;
  startedAt: string;
  finishedAt: string;
  /** Events in the batch (0 for "expired": a lease that ran out; its size is not known). */
  events: number;
  outcome: "acked" | "failed" | "dead" | "expired";
}

/** A scoped API token as listed (Corq.listTokens, GET /tokens): never its secret. */
export interface TokenInfo {
  id: string;
  name: string;
  scopes: TokenScope[];
  /** Appends only to streams whose name starts with it; null: any stream. Reads are not limited. */
  streamPrefix: string | null;
  createdAt: string;
  /** Updated at most once a minute per token (the lookup writes it). */
  lastUsedAt: string | null;
}

/** What Corq.createToken returns: the secret, shown this once (only its hash is stored). */
export interface CreatedToken extends TokenInfo {
  token: string;
}
