// The app this repository's Worker runs: the example (`npm start`'s demo). A Worker of your
// own passes its own subscriptions and migrations to createWorker (corq/worker) instead.
import type { SubscriptionDefinition } from "../src/index.js";
import type { WorkerApp } from "./createWorker.js";
import { exampleSchema, visitorSubscriptions } from "../example/visitors.js";

export const subscriptions: SubscriptionDefinition[] = visitorSubscriptions;

export const app: WorkerApp = {
  subscriptions,
  migrations: [{ name: "example-visitors", statements: exampleSchema }],
};
