// Appends' kicks coalesced within one isolate. A Workers isolate serves many requests at once;
// at 200 appends/s each kick (register, advance, re-check, slot claim: 4–5 statements) would
// queue behind the others' at the database and hold up the consumers' own statements. The
// database already coalesces kicks across isolates (advance_kicks); this saves the statements
// of kicks that meet in one isolate.
//
// While a kick runs here, later kicks leave their event names with it and return at once. When
// its first round is done, the running kick takes what was left and — in the same synchronous
// step — stops collecting, then runs one more round for it. A kick that comes after that runs
// on its own. So every kick either runs, or its names are taken by a round that starts after
// its append committed; nothing waits behind more than one round. A round that fails loses its
// names like a failed kick does: the cron advances every subscription.
//
// Kicks meet only within one scope: one database AND one app's code subscriptions. A kick
// advances and claims consumer slots for the subscriptions of the app that runs it (its Corq's
// code subscriptions, slot options' codeSubscriptions): two Worker apps in one isolate on one
// database, with different subscriptions, must not leave their event names with each other.

/** Event names left for the running kick; `all` when one caller named none (a rewind's dispatch). */
export type Left = Set<string> | "all";

/** Who a kick works for: the database, and the app's code subscriptions (their names). */
export interface KickScope {
  databaseUrl: string;
  codeSubscriptions: string[];
}

/** The scope as a map key: one per database and SET of code subscription names (order does not matter). */
export function scopeKey({ databaseUrl, codeSubscriptions }: KickScope): string {
  return JSON.stringify([databaseUrl, [...new Set(codeSubscriptions)].sort()]);
}

const running = new Map<string, { left: Left | undefined; startedAt: number }>();
// A kick still running after this long is taken for hung (a fetch that never answers, a
// waitUntil the runtime cancelled): later kicks run on their own instead of leaving their names
// with it forever.
const STALE_MS = 30_000;

/**
 * Runs `first` unless a kick for `scope` (one database, one app) is already running in this isolate, in
 * which case `eventNames` are left with it and `undefined` is returned. Otherwise, after `first`,
 * runs `again` once with the names left meanwhile (if any) and returns both results.
 */
export async function coalesceKicks<T>(
  kickScope: KickScope,
  eventNames: string[] | undefined,
  first: () => Promise<T>,
  again: (names: string[] | undefined, firstResult: T) => Promise<T>,
): Promise<T | undefined> {
  const scope = scopeKey(kickScope);
  const current = running.get(scope);
  if (current && Date.now() - current.startedAt < STALE_MS) {
    current.left = merge(current.left, eventNames);
    return undefined;
  }
  const entry = { left: undefined as Left | undefined, startedAt: Date.now() };
  running.set(scope, entry);
  let result: T;
  try {
    result = await first();
  } finally {
    // taken and closed in one synchronous step: a kick after this runs on its own (unless a
    // later kick already replaced this one as hung)
    if (running.get(scope) === entry) running.delete(scope);
  }
  const left = entry.left;
  if (left === undefined) return result;
  return again(left === "all" ? undefined : [...left], result);
}

function merge(left: Left | undefined, names: string[] | undefined): Left {
  if (names === undefined || left === "all") return "all";
  const set = left ?? new Set<string>();
  for (const name of names) set.add(name);
  return set;
}
