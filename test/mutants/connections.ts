// Mutants of the pools' guard: no connection error reaches the process as an uncaught exception
// (src/db/guardPool.ts), and of the settlements' retry on a new connection (src/consume/retrySettle.ts)
// (issue 48; gathered by mutants.ts).
import { one, type Mutant } from "./mutant.js";

export const connectionsMutants: Mutant[] = [
  {
    name: "connections: no listener on a lent client (the acquire listener never added): a FATAL read with the ReadyForQuery is uncaught",
    edits: one("src/db/guardPool.ts", 'emitter.on("acquire",', 'emitter.on("acquire-never-emitted",'),
    tests: ["test/poolErrors.int.test.ts"],
  },
  {
    name: "connections: an idle client's error unheard (the pool's own 'error' listener gone)",
    edits: one("src/db/guardPool.ts", '  emitter.on("error", ignore);\n', ""),
    tests: ["test/connectionLoss.int.test.ts"],
  },
  {
    name: "connections: a pool given to corq (createCorq({ db }), a user's) not guarded",
    edits: one("src/db/executor.ts", "  if (isPool(connection)) guardPool(connection);\n", ""),
    tests: ["test/poolErrors.int.test.ts"],
  },
  {
    name: "connections: a client that died before it was used is used (its statement fails instead of a new connect)",
    edits: one("src/db/executor.ts", "  if (lost === undefined) return client;", "  return client;"),
    tests: ["test/poolErrors.int.test.ts"],
  },
  {
    name: "connections: corq dev's HTTP SQL endpoint's pool not guarded",
    edits: one(
      "cli/dev/httpSqlEndpoint.ts",
      "      pool = guardPool(\n",
      "      pool = ((created: pg.Pool) => created)(\n",
    ),
    tests: ["test/poolErrors.int.test.ts"],
  },
  {
    name: "connections: a settlement that fails on a connection error is not sent again (the lease runs out unsettled)",
    edits: one(
      "src/consume/retrySettle.ts",
      "    return await sendWithRetries(send, { until: options.until, repeatable: true, again: options.again });",
      "    return await send();",
    ),
    tests: ["test/settleRetry.int.test.ts"],
  },
  {
    name: "connections: a statement whose answer was lost is sent again whatever it is (an append stored twice)",
    edits: one(
      "src/db/retries.ts",
      "  return neverCommitted(error) || (repeatable && isTransient(error));",
      "  return neverCommitted(error) || isTransient(error);",
    ),
    tests: ["test/retries.int.test.ts"],
  },
  {
    name: "connections: an advance is not repeatable (one whose answer was lost is not sent again)",
    edits: one(
      "src/advance.ts",
      "const REPEATABLE = { repeatable: true } as const;",
      "const REPEATABLE = {} as const;",
    ),
    tests: ["test/retries.int.test.ts"],
  },
  {
    name: "connections: a statement is never sent again by the executor (only the settlements' own loop)",
    edits: one(
      "src/db/executor.ts",
      "      until: resends ? (runOptions.retryUntil ?? Date.now() + withinMs) : 0,",
      "      until: 0,",
    ),
    tests: ["test/retries.int.test.ts"],
  },
  {
    name: "connections: a failed connect counts as a statement that may have run (an append after a refused connect not sent again)",
    edits: one(
      "src/errors.ts",
      "  if (error instanceof ConnectFailed) return true;\n  return (typeof",
      "  return (typeof",
    ),
    tests: ["test/retries.int.test.ts"],
  },
  {
    name: "connections: the Worker sends nothing again (no retry window)",
    edits: one("functions/database.ts", "const WORKER_RETRY_WITHIN_MS = 3000;", "const WORKER_RETRY_WITHIN_MS = 0;"),
    tests: ["test/worker/transientErrors.worker.test.ts"],
  },
  {
    name: "connections: a driver's HTTP status other than 500-504 is left unexplained (as before 4c74cf1)",
    edits: one(
      "src/errors.ts",
      "  if (status !== undefined) {",
      "  if (status !== undefined && /^50[0-4]$/.test(status)) {",
    ),
    tests: ["test/worker/transientErrors.worker.test.ts"],
  },
  {
    name: "connections: only consume()'s ack is sent again, not a drain's settle+claim",
    edits: one(
      "src/consume.ts",
      "          until: settleDeadline(settling.map((d) => d.claimed)),",
      "          until: 0,",
    ),
    tests: ["test/settleRetry.int.test.ts"],
  },
  {
    name: "connections: a settlement sent again past its lease (no deadline: retried for as long as it fails)",
    edits: one(
      "src/consume/retrySettle.ts",
      "  return Math.max(...batches.map((b) => b.leaseHeldUntil - Math.min(1000, b.leaseMs / 10)));",
      "  return Number.POSITIVE_INFINITY;",
    ),
    tests: ["test/settleRetry.int.test.ts"],
  },
  {
    name: "connections: an app's advance() that enqueued tells no serve process (its push events wait for serve's safety net)",
    edits: one("src/corq/advancing.ts", "        ready();", "        void 0;"),
    tests: ["test/serve/wake.serve.test.ts"],
  },
];
