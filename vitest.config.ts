import { configDefaults, defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    globalSetup: ["test/setup/postgres.ts", "test/setup/chaos.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // One test file at a time, on any machine: the xmin horizon the advance reads is the whole
    // server's, so a test that holds a transaction open on purpose would stall the advances of
    // a file running beside it (each file has its own database, but one Postgres).
    fileParallelism: false,
    projects: [
      {
        extends: true,
        test: { name: "suite", include: ["test/**/*.test.ts"], exclude: [...configDefaults.exclude, "test/chaos/**"] },
      },
      // the HTTP contract against `npm run serve` too: the same files, the other runtime (test/helpers/stack.ts)
      {
        extends: true,
        test: {
          name: "serve",
          include: [
            "test/worker/api.worker.test.ts",
            "test/worker/push.worker.test.ts",
            "test/worker/erase.worker.test.ts",
            "test/worker/doctor.worker.test.ts",
            "test/worker/alerts.worker.test.ts",
            "test/worker/traceContext.worker.test.ts",
            "test/worker/rateLimit.worker.test.ts",
          ],
          env: { CORQ_TEST_RUNTIME: "serve" },
        },
      },
      // the process-killing and database-restarting scenarios load the machine: they run after the rest
      { extends: true, test: { name: "chaos", include: ["test/chaos/**/*.test.ts"], sequence: { groupOrder: 1 } } },
    ],
  },
});
