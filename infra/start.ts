// `npm start`: the local stack in the foreground until Ctrl-C / SIGTERM.
import { createServer } from "node:net";
import { startLocalStack } from "./localStack.js";

// The local cron hits /__scheduled every second; keep those request lines out of the terminal
// (the Worker's own console output and every other request still show).
for (const method of ["log", "info"] as const) {
  const original = console[method].bind(console);
  console[method] = (...args: unknown[]) => {
    if (typeof args[0] === "string" && args[0].includes("/__scheduled")) return;
    original(...args);
  };
}

const port = Number(process.env.PORT ?? 8787);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`PORT=${process.env.PORT} is not a port number`);
  process.exit(1);
}
// Checked before anything starts: wrangler would print a workerd stack trace and wait forever.
const refusal = await listenable(port);
if (refusal) {
  console.error(refusal === "EADDRINUSE" ? `port ${port} is in use; set PORT= to another port` : `port ${port}: ${refusal}; set PORT= to another port`);
  process.exit(1);
}

const stack = await startLocalStack({
  databaseUrl: process.env.DATABASE_URL,
  dataDir: process.env.DATABASE_URL ? undefined : ".data/postgres",
  port,
  adminToken: process.env.CORQ_ADMIN_TOKEN,
  webhookSecret: process.env.CORQ_WEBHOOK_SECRET,
  cronIntervalMs: 1000,
  log: (line) => console.log(line),
  logLevel: "log",
}).catch((error) => {
  console.error("corq: the local stack failed to start:", error);
  process.exit(1);
});

const health = await fetch(`${stack.url}/health`);
if (health.status !== 200) {
  console.error(`corq: GET /health answered ${health.status}: ${await health.text()}`);
  await stack.stop();
  process.exit(1);
}
if (!process.env.CORQ_ADMIN_TOKEN) console.log(`admin token: ${stack.adminToken} (set CORQ_ADMIN_TOKEN to change it)`);
console.log(`corq ready ${stack.url}`);

let stopping = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, async () => {
    if (stopping) return;
    stopping = true;
    console.log(`\n${signal}: stopping…`);
    await stack.stop();
    process.exit(0);
  });
}

/** Undefined when 127.0.0.1:port (where the Worker listens) can be bound, else the error code. */
function listenable(port: number): Promise<string | undefined> {
  if (port === 0) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? String(error)));
    server.listen({ port, host: "127.0.0.1", exclusive: true }, () => server.close(() => resolve(undefined)));
  });
}
