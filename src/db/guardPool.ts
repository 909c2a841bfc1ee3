// Every pool corq opens or is given goes through `guardPool`: no connection error of its clients
// reaches the process as an uncaught exception (DESIGN invariant 14).
//
// pg-pool — and the copy of it inside @neondatabase/serverless — listens for 'error' on a client
// only while the client is idle: it removes that listener when it lends the client out, and the
// borrower can add one only when its `await pool.connect()` resumes. A new connection is lent
// from inside the parse of the server's ReadyForQuery; a FATAL in the same read (57P01 when a
// compute suspends or restarts: both can leave the server in one TCP write) is parsed before the
// borrower resumes and emitted on a client that nobody listens to, and the process exits
// (`npm run serve` with every connection terminated every 200–600 ms: exit code 1 in 5 of 7 runs,
// issue 48; test/poolErrors.int.test.ts reproduces it on every pool kind). The pool emits
// 'acquire' before it removes its own listener: ours goes on there (graphile-worker's fix), once
// per client, and stays for the client's life; pg-pool's listener is left as it is.
//
// A client that errs is dead (node-postgres marks it not queryable). The error is kept for
// `lostConnection`: a borrower hands such a client back with it, so the pool destroys it instead
// of lending it again, and a connection that died before anything was sent on it counts as a
// failed connect (src/db/executor.ts retries it).

interface Emitter {
  on(event: string, listener: (...args: never[]) => void): unknown;
}

const guarded = new WeakSet<object>();
const listened = new WeakSet<object>();
const lost = new WeakMap<object, unknown>();

/**
 * Listens for 'error' on `pool` (an idle client that died: the pool has dropped it already) and
 * on every client it lends, from the moment it lends it. Idempotent; a pool without `on` is left
 * as it is. (The Neon Pool takes a listener other than 'error' as a reason not to send its own
 * `pool.query` over HTTP: a user's Neon Pool with `poolQueryViaFetch` on, given to corq, sends its
 * `pool.query` over the WebSocket. corq itself never uses `pool.query`.)
 */
export function guardPool<P extends object>(pool: P): P {
  const emitter = pool as Partial<Emitter>;
  if (typeof emitter.on !== "function" || guarded.has(pool)) return pool;
  guarded.add(pool);
  emitter.on("error", ignore);
  emitter.on("acquire", (client: object) => {
    if (listened.has(client)) return;
    listened.add(client);
    (client as Emitter).on("error", (error: unknown) => {
      // the first error says why (57P01); the socket's close that follows only repeats it
      if (!lost.has(client)) lost.set(client, error);
    });
  });
  return pool;
}

/** The error a lent client's connection died of, if it did (undefined: alive, as far as anyone heard). */
export function lostConnection(client: object): unknown {
  return lost.get(client);
}

const ignore = () => undefined;
