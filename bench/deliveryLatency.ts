// `npm run bench:delivery`: append→delivery through the local Workers stack (http path), the
// figure issue 12 targets, in about half a minute — for trying a change against main quickly.
//   idle    single-event appends one at a time, 150 ms apart, no cron: the pipeline's own cost
//           (append, kick, advance, dispatch, claim, push) and the database statements it takes
//   steady  single-event appends at a fixed rate over 100 streams, the cron every second, and the
//           database statements per append of the whole run
// Prints one JSON line. The full section (burst, both paths, distance) is `npm run bench -- --only connections`.
import { startEmbeddedPostgres } from "../cli/dev/embeddedPostgres.js";
import { startLocalStack, type LocalStack } from "../cli/dev/localStack.js";
import { dropDatabase, freshDatabase } from "./database.js";
import { sleep } from "./workload.js";
import { append, awaitDelivery, putSubscription, startCron, startRecorder, summarize } from "./workersConnections.js";

const rate = Number(process.env.RATE ?? 50);
const seconds = Number(process.env.SECONDS ?? 5);
const idleAppends = Number(process.env.IDLE_APPENDS ?? 40);

async function idle(stack: LocalStack, recorder: Awaited<ReturnType<typeof startRecorder>>) {
  await putSubscription(stack.databaseUrl, "idle", ["Idle"], recorder.url);
  await sleep(500);
  const before = stack.httpStatements();
  const appends = [];
  for (let i = 0; i < idleAppends; i++) {
    appends.push(await append(stack, `idle-${i}`, "Idle", { key: `idle-${i}` }));
    await sleep(150);
  }
  const positions = appends.filter((a) => a.status === 201).map((a) => a.position ?? 0);
  const lost = await awaitDelivery(recorder.log("idle"), positions, 10_000);
  await sleep(500);
  const statements = stack.httpStatements() - before;
  return { ...summarize(appends, recorder.log("idle"), lost), statementsPerAppend: statements / idleAppends };
}

async function steady(stack: LocalStack, recorder: Awaited<ReturnType<typeof startRecorder>>) {
  await putSubscription(stack.databaseUrl, "steady", ["Steady"], recorder.url);
  const stopCron = startCron(stack);
  const before = stack.httpStatements();
  try {
    const requests = [];
    const started = performance.now();
    for (let i = 0; i < rate * seconds; i++) {
      const wait = started + (i * 1000) / rate - performance.now();
      if (wait > 0) await sleep(wait);
      requests.push(append(stack, `steady-${i % 100}`, "Steady", { key: `s${i % 100}`, seq: i }));
    }
    const appends = await Promise.all(requests);
    const positions = appends.filter((a) => a.status === 201).map((a) => a.position ?? 0);
    const lost = await awaitDelivery(recorder.log("steady"), positions, 30_000);
    // every statement of the run (appends, kicks, cron, consumers) per accepted append
    const statements = stack.httpStatements() - before;
    return {
      rate,
      ...summarize(appends, recorder.log("steady"), lost),
      statementsPerAppend: statements / positions.length,
    };
  } finally {
    stopCron();
  }
}

const cluster = process.env.DATABASE_URL ? undefined : await startEmbeddedPostgres();
const serverUrl = process.env.DATABASE_URL ?? cluster?.url ?? "";
const databaseUrl = await freshDatabase(serverUrl, "delivery");
const recorder = await startRecorder();
const stack = await startLocalStack({ databaseUrl, logLevel: "none" });
try {
  const result = { idle: await idle(stack, recorder), steady: await steady(stack, recorder) };
  console.log(JSON.stringify(result));
} finally {
  await stack.stop();
  await recorder.close();
  await dropDatabase(serverUrl, databaseUrl);
  await cluster?.stop();
}
process.exit(0);
