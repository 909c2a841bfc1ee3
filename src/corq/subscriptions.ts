// Subscriptions: their definitions (code ones synced on migrate, push ones put and deleted) and their stats.
import { parsePushSubscription, parseOrThrow, subscriptionName, uniqueStreams, type Subscription } from "../config.js";
import { syncCodeSubscriptions } from "../advance.js";
import { applyAppMigrations } from "../db/appMigrations.js";
import type { Executor } from "../db/executor.js";
import { migrate } from "../db/migrate.js";
import { CorqError, present } from "../errors.js";
import {
  logCount,
  logHead,
  subscriptionStats,
  toSubscriptionStats,
  type LogHeadRow,
  type StatsRow,
} from "../sql/inspect/subscriptionStats.js";
import {
  deleteSubscription,
  deleteSubscriptionRows,
  putSubscription,
  type PutRow,
} from "../sql/operate/putSubscription.js";
import type { Corq, SubscriptionStats } from "../types.js";
import { newSigningSecret } from "../webhookSignature.js";
import type { PartDeps } from "./options.js";

/** A subscription's stats, or unknown_subscription; `db`: in the caller's transaction. */
export type KnownSubscription = (name: string, db?: Executor) => Promise<SubscriptionStats>;

// a code subscription this instance does not define is orphaned: its code is gone (or
// lives in another deployment); operators may delete it
export const describeSubscription = (row: StatsRow, code: Map<string, Subscription>): SubscriptionStats => ({
  ...toSubscriptionStats(row),
  orphaned: row.kind === "code" && !code.has(row.name),
});

export interface SubscriptionsPart extends Pick<Corq, "migrate" | "stats" | "putSubscription" | "deleteSubscription"> {
  subscription: KnownSubscription;
}

export function createSubscriptions({
  executor,
  settings: { code, appMigrations, pushAllowPrivate },
}: PartDeps): SubscriptionsPart {
  const described = (row: StatsRow) => describeSubscription(row, code);

  const knownSubscription: KnownSubscription = async (name, db) => {
    parseOrThrow(subscriptionName, name, "invalid_input", "subscription");
    const [row] = await (db ?? (await executor())).run<StatsRow>(subscriptionStats(name));
    if (!row) throw new CorqError("unknown_subscription", `no subscription named "${name}"`);
    return described(row);
  };

  return {
    async migrate() {
      const db = await executor();
      const applied = await migrate(db);
      applied.push(...(await applyAppMigrations(db, appMigrations)));
      await syncCodeSubscriptions(db, code);
      return { applied };
    },

    async stats() {
      const db = await executor();
      const rows = await db.run<StatsRow>(subscriptionStats());
      const [headRow] = await db.run<LogHeadRow>(logHead());
      const head = present(headRow, "the log head row");
      return {
        subscriptions: rows.map(described),
        log: { head: head.head === null ? null : Number(head.head), ...logCount(head) },
      };
    },

    subscription: knownSubscription,

    async putSubscription(name, input) {
      parseOrThrow(subscriptionName, name, "invalid_input", "name");
      const settings = parsePushSubscription(input, { allowPrivate: pushAllowPrivate });
      if (code.has(name)) throw new CorqError("conflict", `subscription "${name}" is defined in code`);
      const generated = newSigningSecret();
      const { secret: given, ...deliver } = settings.deliver;
      const events = settings.events.includes("*") ? ["*"] : [...new Set(settings.events)];
      const streams = uniqueStreams(settings.streams);
      const [row] = await (await executor()).run<PutRow>(
        putSubscription({ ...settings, name, events, streams }, deliver, { given, generated }),
      );
      if (!row) throw new CorqError("conflict", `subscription "${name}" is defined in code`);
      const subscription = await knownSubscription(name);
      return row.created
        ? { created: true, subscription, secret: given ?? generated }
        : { created: false, subscription };
    },

    async deleteSubscription(name) {
      parseOrThrow(subscriptionName, name, "invalid_input", "name");
      const row = await (await executor()).transaction(async (tx) => {
        const [found] = await tx.run<{ kind: string; removed: number | null }>(
          deleteSubscription(name, code.has(name) ? "keep" : "delete"),
        );
        if (found?.removed != null) await tx.run(deleteSubscriptionRows(found.removed));
        return found;
      });
      if (!row) throw new CorqError("unknown_subscription", `no subscription named "${name}"`);
      if (row.removed === null)
        throw new CorqError("conflict", `subscription "${name}" is defined in code; remove it there`);
    },
  };
}
