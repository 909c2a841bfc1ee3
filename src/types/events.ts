// The events of the log: what an append takes and returns, what the log and a handler hold.

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

export interface AppendResult {
  stream: string;
  /** The stream's last version after the append. */
  version: number;
  /** The global position of each appended event, in input order. */
  positions: number[];
  /** An idempotent append's repeat: what the first append with its key answered; nothing was written. */
  replayed?: true;
}
