// `npm run db:migrate`: applies corq's migrations to DATABASE_URL (your Neon database before
// `wrangler deploy`); the same as `corq migrate` from the package. It registers no
// subscription: the deployed Worker registers its own code subscriptions at its first advance,
// and applies its app's own migrations itself. `--example` also applies the example app's
// tables (this repository's Worker would on its first request).
import { createCorq } from "../src/index.js";
import { app } from "../functions/app.js";

const databaseUrl = process.env.DATABASE_URL;
if (!databaseUrl) {
  console.error("set DATABASE_URL to the database to migrate");
  process.exit(1);
}
const corq = createCorq({ databaseUrl, migrations: process.argv.includes("--example") ? app.migrations : [] });
try {
  const { applied } = await corq.migrate();
  console.log(applied.length ? `applied ${applied.join(", ")}` : "up to date");
} finally {
  await corq.close();
}
