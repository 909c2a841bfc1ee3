import { expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { renderMigrationsModule } from "../infra/bundleMigrations.js";

it("src/db/migrations.ts matches drizzle/ (run `npm run db:generate` after changing the schema)", () => {
  expect(readFileSync(new URL("../src/db/migrations.ts", import.meta.url), "utf8")).toBe(renderMigrationsModule());
});
