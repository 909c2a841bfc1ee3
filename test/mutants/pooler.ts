// Mutants of serve's wake-ups behind a transaction-mode pooler: the LISTEN's probe, the polling
// instead, CORQ_LISTEN_DATABASE_URL, and the listener's payload filter (issue 48, item 3;
// gathered by mutants.ts).
import { one, type Mutant } from "./mutant.js";

export const poolerMutants: Mutant[] = [
  {
    name: "pooler: no probe after LISTEN (through a pooler serve would be silently slow)",
    edits: one(
      "src/node/wakeUps.ts",
      "    probe: { send: (token) => options.db.run(notifyProbe(token)), timeoutMs: probeTimeoutMs },",
      "    probe: undefined && { send: (token: string) => options.db.run(notifyProbe(token)), timeoutMs: probeTimeoutMs },",
    ),
    tests: ["test/serve/pooler.serve.test.ts"],
  },
  {
    name: "pooler: no polling while LISTEN hears nothing (work waits for the safety net)",
    edits: one(
      "src/node/wakeUps.ts",
      "    if (!listener.delivering()) options.recheck();",
      "    if (false) options.recheck();",
    ),
    tests: ["test/serve/pooler.serve.test.ts"],
  },
  {
    name: "pooler: CORQ_LISTEN_DATABASE_URL ignored (LISTEN through the pooler)",
    edits: one("src/node/serve.ts", "    listenUrl: deps.listenUrl ?? database.url,", "    listenUrl: database.url,"),
    tests: ["test/serve/pooler.serve.test.ts"],
  },
  {
    name: "pooler: the listener's own probe not recognized (a direct LISTEN reported as deaf)",
    edits: one(
      "src/node/wakeListener.ts",
      "      if (awaited && payload === awaited.payload) return awaited.arrived();\n",
      "",
    ),
    tests: ["test/wakeListener.int.test.ts"],
  },
  {
    name: "pooler: every payload a wake-up (another process's probe, an unknown payload)",
    edits: one(
      "src/node/wakeListener.ts",
      'if (payload === "append" || payload === "ready" || payload === "tokens" || payload === "alerts")',
      "if (payload !== undefined)",
    ),
    tests: ["test/wakeListener.int.test.ts"],
  },
];
