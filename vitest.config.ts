import { configDefaults, defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    globalSetup: ["test/setup/postgres.ts", "test/setup/chaos.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    projects: [
      { extends: true, test: { name: "suite", include: ["test/**/*.test.ts"], exclude: [...configDefaults.exclude, "test/chaos/**"] } },
      // the process-killing and database-restarting scenarios load the machine: they run after the rest
      { extends: true, test: { name: "chaos", include: ["test/chaos/**/*.test.ts"], sequence: { groupOrder: 1 } } },
    ],
  },
});
