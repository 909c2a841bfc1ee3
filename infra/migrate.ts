// `npm run db:migrate`: applies corq's migrations to DATABASE_URL (your Neon database before
// `wrangler deploy`). It registers no subscription: the deployed Worker registers its own code
// subscriptions at its first advance, so a database never gets subscriptions from code that
// does not run against it. `--example` also creates the example app's tables (the Worker in
// this repository runs the example: functions/app.ts).
import { createCorq } from "../src/index.js";
import { applyExampleSchema } from "./localStack.js";

const databaseUrl = process.env.DATABASE_URL;
if (!databaseUrl) {
  console.error("set DATABASE_URL to the database to migrate");
  process.exit(1);
}
const corq = createCorq({ databaseUrl });
try {
  const { applied } = await corq.migrate();
  if (process.argv.includes("--example")) await applyExampleSchema(databaseUrl);
  console.log(applied.length ? `applied ${applied.join(", ")}` : "up to date");
} finally {
  await corq.close();
}
