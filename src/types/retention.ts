// The retention policy of the log (docs/operations.md, "Retention"; docs/http-api.md, "Retention").

/** What to remove: events older than `maxAgeMs` (null: keep the log forever), of streams starting with one of `streams` (null: every stream). */
export interface RetentionPolicy {
  maxAgeMs: number | null;
  streams?: string[] | null;
}

/** The policy in force and the horizon. */
export interface Retention {
  maxAgeMs: number | null;
  streams: string[] | null;
  /**
   * 1 + the highest position retention has removed; null while it has removed nothing. From
   * the horizon on nothing was removed; below it the log has gaps (what retention keeps there:
   * streams the policy does not take, events a queue still held). A rewind below it is refused.
   */
  horizon: number | null;
}

/** One retention pass. */
export interface RetentionRun {
  /** Events this pass removed. */
  deleted: number;
  horizon: number | null;
  /** false: the pass stopped at its bound with more to remove (the next pass goes on from there). */
  done: boolean;
}
