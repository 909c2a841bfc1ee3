import { startEmbeddedPostgres } from "../infra/embeddedPostgres.js";
import { freshDatabase } from "./database.js";
import { pushNode, pushWorkers } from "./systems/push.js";
import { latency } from "./systems/corq.js";
import { percentile } from "./stats.js";
const pg = await startEmbeddedPostgres();
try {
  const w = { events: 20000, keys: 1000, consumers: 8, batchSize: 100 };
  console.log("push node", await pushNode(await freshDatabase(pg.url, "p"), w));
  console.log("push workers", await pushWorkers(await freshDatabase(pg.url, "w"), w));
  const s = await latency(await freshDatabase(pg.url, "l"), { rate: 1000, seconds: 5, consumers: 8 });
  console.log("latency", s.length, percentile(s, 50), percentile(s, 99));
} finally { await pg.stop(); }
