// `npm run db:migrate`: applies corq's migrations and the example app's table to DATABASE_URL
// (your Neon database before `wrangler deploy`), and registers the Worker's code subscriptions.
import { createCorq } from "../src/index.js";
import { subscriptions } from "../functions/app.js";
import { applyExampleSchema } from "./localStack.js";

const databaseUrl = process.env.DATABASE_URL;
if (!databaseUrl) {
  console.error("set DATABASE_URL to the database to migrate");
  process.exit(1);
}
const corq = createCorq({ databaseUrl, subscriptions });
try {
  const { applied } = await corq.migrate();
  await applyExampleSchema(databaseUrl);
  console.log(applied.length ? `applied ${applied.join(", ")}` : "up to date");
} finally {
  await corq.close();
}
