// Operations: pause and resume (a subscription, a key), rewind, release dead keys (retry or skip).
import { z } from "zod";
import type { Executor } from "../db/executor.js";
import { correlationKey, parseOrThrow, subscriptionName } from "../config.js";
import { CorqError } from "../errors.js";
import { rewindSubscription } from "../rewind.js";
import { kicksPending } from "../sql/advance/advanceSubscription.js";
import { rememberWebhookId } from "../sql/consume/webhookIds.js";
import { pauseKey, resumeKey } from "../sql/operate/pauseKey.js";
import { releaseDeadKeys } from "../sql/operate/releaseDeadKeys.js";
import { setPaused } from "../sql/operate/setPaused.js";
import { refuseRewindBelowHorizon } from "./retention.js";
import type { Corq } from "../types.js";
import type { PartDeps } from "./options.js";
import type { KnownSubscription } from "./subscriptions.js";

const rewindOptions = z.object({
  to: z.union([z.literal("beginning"), z.number().int().min(1).max(Number.MAX_SAFE_INTEGER)]),
  key: correlationKey.optional(),
});
const releaseOptions = z.object({
  subscription: subscriptionName,
  key: correlationKey.optional(),
  mode: z.enum(["retry", "skip"]).default("retry"),
  webhookId: z.string().min(1).max(200).optional(),
});

export function createOperations({
  executor,
  settings,
  subscription: knownSubscription,
  key: keyState,
  advance,
}: PartDeps & {
  /** A subscription's stats, or unknown_subscription (a release that found nothing dead). */
  subscription: KnownSubscription;
  /** A key's state, or unknown_subscription / unknown_key: what pauseKey and resumeKey answer. */
  key: Corq["key"];
  /** The advance, for the kicks that waited while a rewind held the advancer's lock. */
  advance: Corq["advance"];
}): Pick<Corq, "pause" | "resume" | "pauseKey" | "resumeKey" | "rewind" | "releaseDeadLetters"> {
  const { code } = settings;
  const pausedTo = async (name: string, paused: boolean) => {
    parseOrThrow(subscriptionName, name, "invalid_input", "subscription");
    const rows = await (await executor()).run(setPaused(name, paused));
    if (rows.length === 0) throw new CorqError("unknown_subscription", `no subscription named "${name}"`);
  };

  return {
    pause: (name) => pausedTo(name, true),
    resume: (name) => pausedTo(name, false),

    async pauseKey(name, key) {
      parseOrThrow(subscriptionName, name, "invalid_input", "subscription");
      parseOrThrow(correlationKey, key, "invalid_input", "key");
      const rows = await (await executor()).run(pauseKey(name, key));
      if (rows.length === 0) throw new CorqError("unknown_subscription", `no subscription named "${name}"`);
      return keyState(name, key);
    },

    async resumeKey(name, key) {
      parseOrThrow(subscriptionName, name, "invalid_input", "subscription");
      parseOrThrow(correlationKey, key, "invalid_input", "key");
      await (await executor()).run(resumeKey(name, key));
      return keyState(name, key); // when nothing was resumed: says which is unknown, the subscription or the key
    },

    async rewind(name, rewindOpts) {
      parseOrThrow(subscriptionName, name, "invalid_input", "subscription");
      const { to, key } = parseOrThrow(rewindOptions, rewindOpts, "invalid_input", "options");
      const db = await executor();
      const keyFunction = code.get(name)?.key;
      // below the retention horizon: refused here, before the rewind marks anything (and again if
      // the event at `to` went while it began: a retention pass removed it meanwhile)
      if (to !== "beginning") await refuseRewindBelowHorizon(db, to);
      const done = await rewindSubscription(
        db,
        { subscription: name, to, key },
        { keyFunction: keyFunction?.kind === "function" ? keyFunction : undefined, chunk: settings.advanceBatchSize },
      ).catch(async (error: unknown) => {
        if (to !== "beginning" && error instanceof CorqError && error.code === "invalid_input")
          await refuseRewindBelowHorizon(db, to);
        throw error;
      });
      // advances that came while the subscription was being rewound left a kick and returned
      if ((await db.run(kicksPending([done.subscriptionId]))).length > 0) await advance({ coalesce: true });
      return { requeued: done.requeued };
    },

    async releaseDeadLetters(releaseOpts) {
      const { subscription, key, mode, webhookId } = parseOrThrow(
        releaseOptions,
        releaseOpts,
        "invalid_input",
        "options",
      );
      const release = async (db: Executor) => {
        const rows = await db.run(releaseDeadKeys(subscription, key, mode));
        if (rows.length === 0) await knownSubscription(subscription, db); // nothing dead, or no such subscription?
        return { released: rows.length };
      };
      const db = await executor();
      if (!webhookId) return release(db);
      // with a webhook id: the id is recorded in the same transaction, so a replay finds it and
      // a release that fails (even as unknown_subscription) leaves it unrecorded: the sender's
      // retry with the same id is not taken for a replay
      return db.transaction(async (tx) => {
        if ((await tx.run(rememberWebhookId(webhookId))).length === 0) {
          throw new CorqError("conflict", `webhook ${webhookId} was already processed`);
        }
        return release(tx);
      });
    },
  };
}
