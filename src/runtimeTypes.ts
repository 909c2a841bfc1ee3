// What the runtimes (the Worker's dispatcher, the Node runner) drive beside the user's API: consumer
// slots, kicks, the horizon probe, ready-key counts. Not exported from the package's main entry
// (src/index.ts) and not in the user docs: they can change in any release. functions/ and
// src/node/ get them from src/internal.ts.
import type { Fence } from "./sql/log/appendEvents.js";
import type { Executor } from "./db/executor.js";
import type { AnyEvents, AppendResult, Corq, EventInput, EventName, StoredEvent } from "./types.js";

export interface CorqRuntime extends Corq {
  /**
   * Corq's append, and for the HTTP API whose idempotency key it is: `idempotencyScope`
   * (src/http/idempotencyScope.ts; the library's own appends: ''). A key answers, refuses and
   * is in flight only within its scope.
   */
  append<N extends EventName<AnyEvents>>(
    stream: string,
    events: EventInput<AnyEvents, N>[],
    options?: Parameters<Corq["append"]>[2] & {
      idempotencyScope?: string;
      /** A routed append (src/cells/): written only where the cell holds this slot at this epoch. */
      fence?: Fence;
    },
  ): Promise<AppendResult>;
  /**
   * For dispatchers, in one statement: the subscriptions with ready keys (push ones, and code
   * ones named in `codeSubscriptions`) and their count, up to `max` × `keysPerClaim`; the
   * consumers each wants (`consumers`: one per `keysPerClaim` ready keys, rounded up — a
   * consumer claims that many keys per statement); and a consumer slot per consumer wanted, up
   * to `want`, among the first `max` slots, each busy for `holdMs`. Concurrent dispatchers get
   * different slots, so at most `max` consumers run. Start one consumer per slot returned; it
   * calls releaseSlot(slot) when done. `waiting`: committed events wait above the xmin horizon
   * (an older transaction still runs), so no advance can take them yet — the transaction of the
   * newest of them (see horizonWaiting), or null.
   */
  claimSlots(options: {
    max: number;
    want: number;
    holdMs: number;
    codeSubscriptions: string[];
    /** keys each consumer claims per statement (CORQ_KEYS_PER_CLAIM); 1 unless told: a slot per ready key */
    keysPerClaim?: number;
    /** slots the caller already holds for these keys (a dispatcher's second look) */
    covered?: number;
  }): Promise<{ ready: [string, number][]; consumers: [string, number][]; slots: number[]; waiting: string | null }>;
  releaseSlot(slot: number): Promise<void>;
  /**
   * Whether committed events wait above the xmin horizon: an advance cannot take them until the
   * older transactions still running end, and nothing wakes anyone when they do. With `tx` (a
   * `waiting` from claimSlots): whether the horizon has not yet passed that transaction.
   */
  horizonWaiting(tx?: string): Promise<boolean>;
  /**
   * A dispatcher's wake-up (an append's kick, the cron): advance({ coalesce: true, eventNames })
   * and then claimSlots(slots). The advance's re-check for the kicks others left meanwhile runs
   * beside the slot claim (the caller's own events are enqueued before it), so an append's
   * events reach a consumer one statement sooner; when the re-check enqueued more and slots
   * are left, they are claimed too.
   */
  kick(options: { eventNames?: string[]; slots: Parameters<CorqRuntime["claimSlots"]>[0] }): Promise<{
    advanced: Record<string, number>;
    ready: [string, number][];
    consumers: [string, number][];
    slots: number[];
    waiting: string | null;
  }>;
  /**
   * GET /streams/:stream: readStream's events, and for an erased stream `erased: true` with its
   * version (the tombstone; events appended after the erasure are listed).
   */
  streamPage(
    stream: string,
    options?: { from?: number; limit?: number },
  ): Promise<{ stream: string; events: StoredEvent[]; erased?: true; version?: number }>;
  /** Ready keys per unpaused subscription, counted up to `cap` (for dispatchers). */
  readyKeys(cap: number): Promise<Record<string, { kind: "code" | "push"; ready: number }>>;
  /**
   * One housekeeping pass (the cron, `serve` once a minute): idle key rows compacted — nothing
   * queued, no live lease, not dead, not paused, no activity for `keyIdleMs` — at most
   * `maxChunks` (default 4) statements of 5,000 keys, never waiting for a subscription another
   * statement holds (`busySubscriptions`: left for the next pass); and, in one statement, batch
   * records older than 15 minutes, expired dashboard sessions, webhook ids past their window and
   * idempotency keys past theirs.
   */
  housekeeping(options?: { maxChunks?: number }): Promise<{
    keys: number;
    busySubscriptions: number;
    activity: number;
    sessions: number;
    webhookIds: number;
    idempotencyKeys: number;
  }>;
  /** The connection of this Corq, for the statements of src/cells/ (a move's reads and writes in a cell). */
  database(): Promise<Executor>;
}
