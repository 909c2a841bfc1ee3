// What a code subscription's handler gets and may answer. Its context holds the Corq (corq.ts),
// which refers to none of these shapes: the types point one way, into corq.ts.
import type { SQL } from "drizzle-orm";
import type { CorqTransaction } from "../db/drizzleTransaction.js";
import type { AnyEvents, DeliveredEvent, EventMap, EventName } from "./events.js";
import type { Corq } from "./corq.js";
import type { TraceHeaders } from "./traceHeaders.js";

export interface HandlerContext<E extends EventMap = AnyEvents> {
  subscription: string;
  /** Changes when the subscription is deleted and created again: seqs of two incarnations are unrelated. */
  incarnation: string;
  key: string;
  /** 1 on the first delivery of this batch's head event, then 2, 3 … */
  attempt: number;
  /** Aborted when the lease expires: stop work you can stop. */
  signal: AbortSignal;
  /** The corq instance that claimed the batch: policies and process managers append with it. */
  corq: Corq<E>;
  /**
   * Runs one statement (drizzle `sql` template) on corq's connection: projections write with it.
   * In a transactional subscription it runs in the batch's transaction, as `tx` does.
   */
  run<T = Record<string, unknown>>(query: SQL): Promise<T[]>;
  /**
   * Only in a `transactional: true` subscription (always there): the batch's transaction, a
   * drizzle transaction. What the handler writes with it commits in the same transaction as the
   * ack of the batch, fenced by the lease — or not at all: a handler that throws, or a lease lost
   * meanwhile, rolls it back (docs/library.md, "Transactional handlers").
   */
  tx?: CorqTransaction;
  /**
   * The W3C trace context to pass on: with a registered OpenTelemetry tracer, this batch's
   * `process <subscription>` span's, for where the active context does not reach (a Worker has
   * no context manager); without one, the `traceparent` (and `tracestate`) the batch's first
   * event that has one was appended with, as given. Undefined when there is neither —
   * docs/operations.md, "Traces".
   */
  trace?: TraceHeaders;
}

/** The context of a transactional handler: `tx` is always there (annotate `ctx` with it, or write `ctx.tx!`). */
export interface TransactionalHandlerContext<E extends EventMap = AnyEvents> extends HandlerContext<E> {
  tx: CorqTransaction;
}

/**
 * What a handler may answer: nothing (ack the batch), `{ ackedThrough: position }` (ack a
 * prefix; the rest is delivered again, in order), or `{ retryAfterMs }` ("come back later": a
 * downstream said 429 or is down for maintenance — nothing is acked, the key waits that long
 * (at most an hour), and no attempt is counted; bounded apart: docs/flow-control.md).
 */
// biome-ignore lint/suspicious/noConfusingVoidType: a handler that returns nothing acks
export type HandlerResult = void | { ackedThrough: number } | { retryAfterMs: number; reason?: string };

/**
 * Receives the events of ONE key, ascending seq order (log order; replays after what was
 * queued before the rewind). Return nothing to ack the batch,
 * `{ ackedThrough: position }` to ack a prefix (the rest is delivered again, in order),
 * `{ retryAfterMs }` to come back later without an attempt counted,
 * or throw to fail it (retried with backoff, dead after maxAttempts).
 */
export type Handler<E extends EventMap = AnyEvents, N extends EventName<E> = EventName<E>> = (
  events: DeliveredEvent<E, N>[],
  context: HandlerContext<E>,
) => Promise<HandlerResult> | HandlerResult;
