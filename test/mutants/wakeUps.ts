// Mutants of the wake-ups at the due time on Workers (issue 49, item 1): the object's one alarm,
// who arms it, the consumer's wait in place, and what a Worker without the binding says
// (gathered by mutants.ts).
import { one, type Mutant } from "./mutant.js";

const WORKER = "test/worker/wakeUps.worker.test.ts";

export const wakeUpsMutants: Mutant[] = [
  {
    name: "wake-ups: the object moves its alarm to any time asked for (later too: not the earliest)",
    edits: one("functions/wakeUps.ts", "const set = current === null || at < current;", "const set = true;"),
    tests: ["test/wakeUps.test.ts"],
  },
  {
    name: "wake-ups: the object never sets its alarm",
    edits: one(
      "functions/wakeUps.ts",
      "if (set) await storage.setAlarm(at);",
      "if (set && false) await storage.setAlarm(at);",
    ),
    tests: ["test/wakeUps.test.ts", WORKER],
  },
  {
    name: "wake-ups: the alarm dispatches without corq-wake-up (a dispatch the object waits for)",
    edits: one("functions/wakeUps.ts", '[WAKE_UP_HEADER]: "alarm"', '"corq-woken": "alarm"'),
    tests: ["test/wakeUps.test.ts"],
  },
  {
    name: "wake-ups: no dispatch arms one (the cron's, a kick's, a wake-up's)",
    edits: one(
      "src/http/dispatch.ts",
      "if (options.housekeeping || options.wakeUp || options.delayed || merged || leftWaiting)",
      "if (false)",
    ),
    tests: [WORKER],
  },
  {
    name: "wake-ups: a consumer invocation does not arm one at its end",
    edits: one(
      "src/http/api.ts",
      "const arming = leftWaiting ? await armWakeUp(c.env, invoke, { opened, subscriptions, dueAt }) : 0;",
      "const arming = leftWaiting && dueAt === undefined ? 0 : 0;",
    ),
    tests: [WORKER],
  },
  {
    name: "wake-ups: an append's delayed event arms nothing (its kick only delivered)",
    edits: one(
      "src/http/api.ts",
      "delayed: body.events.some((e) => e.delayMs !== undefined || e.deliverAt !== undefined),",
      "delayed: false,",
    ),
    tests: [WORKER],
  },
  {
    name: "wake-ups: a drain's failed batches not counted as left waiting",
    edits: one(
      "src/corq/consuming.ts",
      'results.filter((r) => r.outcome === "retry" || r.outcome === "postponed").length',
      'results.filter((r) => r.outcome === "postponed").length',
    ),
    tests: [WORKER],
  },
  {
    name: "wake-ups: a Worker without the binding does not say that wake-ups wait for the cron",
    edits: one("src/http/wakeUps.ts", "if (env.CORQ_NODE || env.CORQ_WAKE_UPS) return [];", "return [];"),
    tests: ["test/worker/noWakeUps.worker.test.ts"],
  },
];
