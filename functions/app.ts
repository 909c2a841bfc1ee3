// The app this Worker runs: its code subscriptions. Replace the example with yours; corq's
// API and cron stay as they are.
import type { SubscriptionDefinition } from "../src/index.js";
import { visitorSubscriptions } from "../example/visitors.js";

export const subscriptions: SubscriptionDefinition[] = visitorSubscriptions;
