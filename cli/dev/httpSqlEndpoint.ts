// A local stand-in for Neon's pooled HTTP SQL endpoint ("SQL over HTTP"), so the Worker runs its
// one-statement operations through the Neon driver's HTTP path (`neon()`, `sql.transaction([...])`)
// locally exactly as against Neon. Point the driver at it with `neonConfig.fetchEndpoint = url`.
//
// What the driver (@neondatabase/serverless 1.2) sends and expects, and what Neon's proxy does
// (neondatabase/neon proxy/src/serverless/sql_over_http.rs), mirrored here:
// - POST `{ query, params }`, or `{ queries: [{ query, params }, …] }` for a transaction; params are
//   text or null (the driver serialises everything, Buffers as '\x…' hex).
// - headers Neon-Connection-String (its user, password and database authenticate, as at Neon; its
//   host is ignored: the address is always the configured one), Neon-Raw-Text-Output:
//   true, Neon-Array-Mode: true, and for a batch Neon-Batch-Isolation-Level / -Read-Only / -Deferrable.
// - 200 `{ command, rowCount, rowAsArray, fields: [{ name, dataTypeID, … }], rows: [[text | null]] }`
//   (a batch: `{ results: [...] }`); every statement through the extended protocol, so one statement
//   per query text, as on Neon.
// - a Postgres error: 400 with its fields; the driver copies them onto NeonDbError (`code` = SQLSTATE).
//   Any other status reaches the caller only as the message "Server error (HTTP status N): <body>".
//
// Protections (as for the WebSocket proxy): listens on 127.0.0.1 only, connects only to the configured
// Postgres, answers only under a random per-start path token, refuses browsers and oversized bodies.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { randomBytes, timingSafeEqual } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { guardPool, lostConnection } from "../../src/db/guardPool.js";

export interface PostgresTarget {
  host: string;
  port: number;
}

export interface HttpSqlEndpointOptions {
  /** The one Postgres address every request runs on (a connection string's host and port are taken). */
  target: string | PostgresTarget;
  /** Pooled connections per user and database; requests beyond it wait in a queue (never refused). */
  poolSize?: number;
  /** Added to every answer, half before the statement runs and half after: simulated network distance. */
  latencyMs?: number;
  /** Larger request bodies are refused with 413 (Neon's limit: 10 MiB). */
  maxRequestBytes?: number;
  /** Larger results are refused with 507, as Neon does (its limit: 10 MiB). */
  maxResponseBytes?: number;
}

export interface HttpSqlEndpoint {
  /** http://127.0.0.1:<port>/<token>/sql — the value for `neonConfig.fetchEndpoint` (a string is accepted). */
  url: string;
  /** Requests answered so far (a single statement or a transaction batch): what a Worker spent. */
  requests(): number;
  close(): Promise<void>;
}

/** The application_name of the endpoint's connections (pg_stat_activity). */
export const HTTP_SQL_APPLICATION_NAME = "corq-http-sql";

const MiB = 1024 * 1024;

interface QueryData {
  query: string;
  params: unknown[];
  arrayMode?: boolean;
}

interface Answer {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

// Every value stays the text Postgres sent; the driver parses it on its side.
const textValues = { getTypeParser: () => (value: string) => value } as unknown as pg.CustomTypesConfig;

const isolationLevels: Record<string, string> = {
  ReadUncommitted: "READ UNCOMMITTED",
  ReadCommitted: "READ COMMITTED",
  RepeatableRead: "REPEATABLE READ",
  Serializable: "SERIALIZABLE",
};

const errorFields = [
  "code",
  "detail",
  "hint",
  "position",
  "internalPosition",
  "internalQuery",
  "where",
  "schema",
  "table",
  "column",
  "dataType",
  "constraint",
  "file",
  "line",
  "routine",
  "severity",
] as const;

export async function startHttpSqlEndpoint(options: HttpSqlEndpointOptions): Promise<HttpSqlEndpoint> {
  const { target, poolSize = 20, latencyMs = 0, maxRequestBytes = 10 * MiB, maxResponseBytes = 10 * MiB } = options;
  const address =
    typeof target === "string"
      ? { host: new URL(target).hostname, port: Number(new URL(target).port || 5432) }
      : target;
  // One pool per credentials and database named by the request's connection string (Neon
  // authenticates with them too: a wrong password is Postgres' 28P01, not a silent success).
  const pools = new Map<string, pg.Pool>();
  const poolFor = (credentials: Credentials) => {
    const id = JSON.stringify(credentials);
    let pool = pools.get(id);
    if (!pool) {
      // a handful of credential sets at most locally; forget the oldest beyond that
      if (pools.size >= 8) {
        const [oldest, old] = pools.entries().next().value!;
        pools.delete(oldest);
        void old.end().catch(() => undefined);
      }
      // connectionTimeoutMillis 0: a request waits for a free connection as long as it takes
      // (pg-pool's timeout would also cut the wait in its queue; queued requests are never refused)
      // a connection that Postgres ended (restart, pg_terminate_backend), idle or lent, fails at most
      // its request, never the process; an idle one leaves the pool, the next request opens another
      pool = guardPool(
        new pg.Pool({ ...address, ...credentials, max: poolSize, application_name: HTTP_SQL_APPLICATION_NAME }),
      );
      pools.set(id, pool);
    }
    return pool;
  };

  const token = randomBytes(18).toString("base64url");
  const path = Buffer.from(`/${token}/sql`);
  let port = 0;
  let answered = 0;

  const answer = async (request: IncomingMessage): Promise<Answer> => {
    const [pathname = ""] = (request.url ?? "").split("?"); // split always gives one part at least
    const requested = Buffer.from(pathname);
    if (requested.length !== path.length || !timingSafeEqual(requested, path)) return problem(404, "not found");
    // a page in a browser must not reach the database: browsers send Origin with every POST (not
    // Sec-Fetch-Mode: Node's fetch sends that one too)
    if (request.headers.origin !== undefined) return problem(403, "requests from browsers are refused");
    if (request.method !== "POST") return { ...problem(405, "only POST"), headers: { allow: "POST" } };
    // DNS rebinding: a name that resolves to 127.0.0.1 is not this endpoint's name
    const host = request.headers.host;
    if (host !== `127.0.0.1:${port}` && host !== `localhost:${port}`) return problem(421, "unexpected Host");

    const body = await readBody(request, maxRequestBytes);
    if (body === "too large") return problem(413, `request is too large (max is ${maxRequestBytes} bytes)`);
    const headers = parseHeaders(request);
    if (typeof headers === "string") return problem(400, headers);
    const payload = parsePayload(body);
    if (typeof payload === "string") return problem(400, payload);

    const pool = poolFor(headers.credentials);
    answered++;
    try {
      if ("queries" in payload) {
        const results = await runBatch(pool, payload.queries, headers);
        return { status: 200, body: { results }, headers: headers.echo };
      }
      return { status: 200, body: await runSingle(pool, payload, headers.arrayMode) };
    } catch (error) {
      return errorAnswer(error);
    }
  };

  // setTimeout(0) still waits a timer tick (about 1 ms): no timer at all without latency
  const distance = () => (latencyMs > 0 ? sleep(latencyMs / 2) : undefined);
  const server = createServer((request, response) => {
    void (async () => {
      await distance();
      const result = await answer(request).catch((error: unknown) => problem(500, describe(error)));
      let text = JSON.stringify(result.body);
      let status = result.status;
      if (Buffer.byteLength(text) > maxResponseBytes) {
        status = 507;
        text = JSON.stringify({ message: `response is too large (max is ${maxResponseBytes} bytes)` });
      }
      await distance();
      send(response, status, text, result.headers);
    })();
  });
  // An idle connection stays open longer than the clients keep theirs (workerd: 5 s, Node's
  // fetch: 4 s), so the client is the one that closes it. Node's default, 5 s, raced workerd's
  // pool: under load the Worker sent a statement into a connection this server had just closed,
  // and the append failed with "Network connection lost" (503 database_unavailable, nothing
  // written; of 3,000 appends from 200 producers through npm start, 1 at load 10 to 12, 38 at
  // load 17). test/httpSqlEndpoint.int.test.ts sends on a connection idle for 6 s.
  server.keepAliveTimeout = 60_000;
  server.headersTimeout = 61_000; // Node's limit on a request's headers, kept above it
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  port = (server.address() as { port: number }).port;

  let closing: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}/${token}/sql`,
    requests: () => answered,
    close: () =>
      (closing ??= (async () => {
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
        // waits for statements still running to finish and give their connections back
        await Promise.all([...pools.values()].map((pool) => pool.end()));
      })()),
  };
}

interface Credentials {
  user: string;
  password: string;
  database: string;
}

interface Headers {
  credentials: Credentials;
  arrayMode: boolean;
  begin: string;
  /** Neon answers a batch with the transaction headers it applied. */
  echo: Record<string, string>;
}

function parseHeaders(request: IncomingMessage): Headers | string {
  const header = (name: string) => request.headers[name.toLowerCase()] as string | undefined;
  // Neon: the connection string must be there; its credentials and database are used, never its host
  const given = header("Neon-Connection-String");
  if (!given) return "missing the Neon-Connection-String header";
  let credentials: Credentials;
  try {
    const url = new URL(given);
    credentials = {
      user: decodeURIComponent(url.username),
      password: decodeURIComponent(url.password),
      database: decodeURIComponent(url.pathname.slice(1)),
    };
  } catch {
    return "Neon-Connection-String is not a connection string";
  }
  // Without it Neon converts values to JSON types; the driver always asks for text
  if (header("Neon-Raw-Text-Output") !== "true") return "this endpoint answers only Neon-Raw-Text-Output: true";
  const modes: string[] = [];
  const echo: Record<string, string> = {};
  const isolation = header("Neon-Batch-Isolation-Level");
  if (isolation !== undefined) {
    if (!Object.hasOwn(isolationLevels, isolation)) return "invalid isolation level";
    modes.push(`ISOLATION LEVEL ${isolationLevels[isolation]}`);
    echo["Neon-Batch-Isolation-Level"] = isolation;
  }
  if (header("Neon-Batch-Read-Only") === "true") {
    modes.push("READ ONLY");
    echo["Neon-Batch-Read-Only"] = "true";
  }
  if (header("Neon-Batch-Deferrable") === "true") {
    modes.push("DEFERRABLE");
    echo["Neon-Batch-Deferrable"] = "true";
  }
  return {
    credentials,
    arrayMode: header("Neon-Array-Mode") === "true",
    begin: ["START TRANSACTION", modes.join(", ")].join(" ").trim(),
    echo,
  };
}

function parsePayload(body: Buffer): QueryData | { queries: QueryData[] } | string {
  let json: unknown;
  try {
    json = JSON.parse(body.toString("utf8"));
  } catch {
    return "the request body is not JSON";
  }
  const query = (value: unknown): QueryData | undefined => {
    const { query: text, params = [], arrayMode } = (value ?? {}) as Record<string, unknown>;
    if (typeof text !== "string" || !Array.isArray(params)) return undefined;
    return { query: text, params, arrayMode: typeof arrayMode === "boolean" ? arrayMode : undefined };
  };
  const queries = (json as { queries?: unknown } | null)?.queries;
  if (Array.isArray(queries)) {
    const parsed = queries.map(query);
    return parsed.every((q) => q !== undefined)
      ? { queries: parsed as QueryData[] }
      : "each of queries needs a query text and a params array";
  }
  return query(json) ?? "expected { query, params } or { queries: [...] }";
}

/**
 * A pooled connection that is alive when lent: one that died on its way (a FATAL read with its
 * ReadyForQuery, src/db/guardPool.ts) had nothing sent on it yet; it is destroyed and another asked
 * for (3 tries).
 */
async function lend(pool: pg.Pool): Promise<pg.PoolClient> {
  for (let attempt = 1; ; attempt++) {
    const client = await pool.connect();
    const lost = lostConnection(client);
    if (lost === undefined) return client;
    client.release(lost as Error);
    if (attempt >= 3) throw lost;
  }
}

async function runSingle(pool: pg.Pool, data: QueryData, arrayMode: boolean) {
  const client = await lend(pool);
  let discard: Error | undefined;
  try {
    const result = await runStatement(client, data, arrayMode);
    // a statement that left its session inside a transaction (a lone BEGIN) must not hand it to the
    // next request: Neon discards such a connection too
    if (client.getTransactionStatus() !== "I") discard = new Error("connection left inside a transaction");
    return result;
  } catch (error) {
    // as Neon: a connection whose statement failed is not reused (a FATAL error such as 57P01 can
    // arrive before the socket closes, and the pool would lend the dead connection again)
    discard = error as Error;
    throw error;
  } finally {
    client.release(discard ?? (lostConnection(client) as Error | undefined));
  }
}

async function runBatch(pool: pg.Pool, queries: QueryData[], headers: Headers) {
  const client = await lend(pool);
  let discard: Error | undefined;
  try {
    await client.query(headers.begin);
    const results = [];
    try {
      for (const data of queries) results.push(await runStatement(client, data, headers.arrayMode));
    } catch (error) {
      if (endsSession(error)) discard = error as Error;
      else await client.query("ROLLBACK").catch((rollbackError: Error) => (discard = rollbackError));
      throw error;
    }
    await client.query("COMMIT");
    return results;
  } catch (error) {
    // BEGIN, COMMIT or the ROLLBACK above failed: a session that is not back to idle is not reused
    if (endsSession(error) || client.getTransactionStatus() !== "I") discard ??= error as Error;
    throw error;
  } finally {
    client.release(discard ?? (lostConnection(client) as Error | undefined));
  }
}

async function runStatement(client: pg.PoolClient, data: QueryData, defaultArrayMode: boolean) {
  // queryMode "extended": parameters or not, one statement per text (Neon's query_raw_txt)
  const result = await client.query({
    text: data.query,
    values: data.params,
    rowMode: "array",
    types: textValues,
    queryMode: "extended",
  } as pg.QueryArrayConfig);
  const arrayMode = data.arrayMode ?? defaultArrayMode;
  const fields = result.fields.map((field) => ({
    name: field.name,
    dataTypeID: field.dataTypeID,
    tableID: field.tableID,
    columnID: field.columnID,
    dataTypeSize: field.dataTypeSize,
    dataTypeModifier: field.dataTypeModifier,
    format: "text",
  }));
  const rows = arrayMode
    ? result.rows
    : result.rows.map((row) => Object.fromEntries(fields.map((field, i) => [field.name, row[i]])));
  return { command: result.command, rowCount: result.rowCount, rowAsArray: arrayMode, fields, rows };
}

/**
 * A Postgres error (it has an SQLSTATE, at connect or in a statement) is a 400 with its fields:
 * the driver puts them on NeonDbError, so corq sees 57P01, 53300, 28P01, 23505 … as it would from Neon.
 * Anything else is the connection failing or breaking (ECONNREFUSED, "Connection terminated …"):
 * 500 like Neon's "could not connect to compute"; the driver keeps only the message, so it names
 * the cause in words corq's isDatabaseUnavailable knows.
 */
function errorAnswer(error: unknown): Answer {
  if (error instanceof pg.DatabaseError) {
    const body: Record<string, unknown> = { message: error.message };
    for (const field of errorFields) body[field] = error[field] ?? null;
    return { status: 400, body };
  }
  return problem(500, `could not reach Postgres: ${describe(error)}`);
}

/** The session is gone: a FATAL or PANIC from Postgres, or no Postgres error at all (the socket failed). */
function endsSession(error: unknown): boolean {
  return !(error instanceof pg.DatabaseError) || error.severity === "FATAL" || error.severity === "PANIC";
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  // Node's connect to a name with several addresses fails with an AggregateError whose own message is empty
  const parts = [
    error.message,
    ...(error instanceof AggregateError ? error.errors.map((e) => String((e as Error).message)) : []),
  ];
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string" && !parts.some((part) => part.includes(code))) parts.unshift(code);
  return parts.filter(Boolean).join("; ") || error.name;
}

function problem(status: number, message: string): Answer {
  return { status, body: { message } };
}

function send(response: ServerResponse, status: number, text: string, headers: Record<string, string> = {}) {
  if (response.destroyed) return;
  response.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    ...headers,
  });
  response.end(text);
}

/** The body, or "too large" as soon as it is known to exceed the limit (the rest is discarded). */
function readBody(request: IncomingMessage, limit: number): Promise<Buffer | "too large"> {
  if (Number(request.headers["content-length"] ?? 0) > limit) return Promise.resolve("too large");
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    request.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) return resolve("too large");
      chunks.push(chunk);
    });
    request.on("end", () => resolve(Buffer.concat(chunks)));
    request.on("error", reject);
  });
}
