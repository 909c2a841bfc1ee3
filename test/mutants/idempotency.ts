// Mutants of idempotent appends: scopes, erasure, the in-flight check (gathered by mutants.ts).
// Issue 47 finding 3: a key is its caller's on its stream (src/http/idempotencyScope.ts), its row,
// lookup and in-flight lock are keyed by (scope, stream, key) (src/sql/log/appendEvents.ts), and
// an erasure round takes the stream's keys with their events (src/sql/log/eraseStream.ts).
import { one, type Mutant } from "./mutant.js";

const APPEND = "src/sql/log/appendEvents.ts";
const ERASE = "src/sql/log/eraseStream.ts";
const SCOPES = "test/idempotencyScopes.int.test.ts";
const IDEMPOTENT = "test/idempotentAppend.int.test.ts";
const ERASURE = "test/erase.int.test.ts";

export const idempotencyMutants: Mutant[] = [
  // --- whose key it is -------------------------------------------------------------------------
  {
    name: "idempotency: the lookup ignores the scope (another token's key refuses or replays this one's append)",
    edits: one(
      APPEND,
      "WHERE scope = ${idempotency.scope} AND stream = ${stream} AND key = ${idempotency.key}",
      "WHERE stream = ${stream} AND key = ${idempotency.key}",
    ),
    tests: [SCOPES],
  },
  {
    name: "idempotency: the key's row recorded without its scope (a token's retry writes again)",
    edits: one(
      APPEND,
      "SELECT ${idempotency.scope}, ${stream}, ${idempotency.key},",
      "SELECT '', ${stream}, ${idempotency.key},",
    ),
    tests: [SCOPES],
  },
  {
    name: "idempotency: the library append drops the scope it is given (every caller's key is the library's)",
    edits: one("src/corq/log.ts", "scope: idempotencyScope,", 'scope: "",'),
    tests: [SCOPES],
  },
  {
    name: "idempotency: the HTTP append passes no scope",
    edits: one("src/http/api.ts", "idempotencyScope: idempotencyScope(c.var.principal),", ""),
    tests: [SCOPES],
  },
  {
    name: "idempotency: every token shares one scope",
    edits: one("src/http/idempotencyScope.ts", "`token:${principal.tokenId}`", '"token"'),
    tests: [SCOPES],
  },
  {
    name: "idempotency: the admin's appends share the library's scope",
    edits: one("src/http/idempotencyScope.ts", '? "admin"', '? ""'),
    tests: [SCOPES],
  },
  {
    name: "idempotency: appends without credentials share the admin's scope",
    edits: one("src/http/idempotencyScope.ts", 'if (!principal) return "public";', 'if (!principal) return "admin";'),
    tests: [SCOPES],
  },
  {
    name: "idempotency: the fingerprint leaves out expectedVersion (another expectedVersion under the key is replayed)",
    edits: one(
      "src/corq/log.ts",
      "sent: JSON.stringify([events, expectedVersion ?? null]),",
      "sent: JSON.stringify([events, null]),",
    ),
    tests: [IDEMPOTENT],
  },
  // --- the in-flight check ---------------------------------------------------------------------
  {
    name: "idempotency: the in-flight lock ignores the scope (another token's append with the key gets 409)",
    edits: one(
      APPEND,
      "hashtextextended(${idempotency.scope} || chr(10) || ${stream} || chr(10) || ${idempotency.key}, ${IDEMPOTENT})",
      "hashtextextended(${stream} || chr(10) || ${idempotency.key}, ${IDEMPOTENT})",
    ),
    tests: [SCOPES],
  },
  {
    name: "idempotency: the in-flight lock ignores the stream (the key on another stream gets 409)",
    edits: one(
      APPEND,
      "hashtextextended(${idempotency.scope} || chr(10) || ${stream} || chr(10) || ${idempotency.key}, ${IDEMPOTENT})",
      "hashtextextended(${idempotency.scope} || chr(10) || ${idempotency.key}, ${IDEMPOTENT})",
    ),
    tests: [IDEMPOTENT, SCOPES],
  },
  {
    name: "idempotency: the in-flight lock keyed by the key alone",
    edits: one(
      APPEND,
      "hashtextextended(${idempotency.scope} || chr(10) || ${stream} || chr(10) || ${idempotency.key}, ${IDEMPOTENT})",
      "hashtextextended(${idempotency.key}, ${IDEMPOTENT})",
    ),
    tests: [IDEMPOTENT, SCOPES],
  },
  // --- erasure -----------------------------------------------------------------------------------
  {
    name: "idempotency: erasure leaves the stream's keys (the erased content can be confirmed, a re-append is replayed)",
    edits: one(ERASE, "WHERE k.stream = ${stream}\n", "WHERE false AND k.stream = ${stream}\n"),
    tests: [ERASURE, SCOPES],
  },
  {
    name: "idempotency: erasure takes the library's keys only (a token's stay)",
    edits: one(ERASE, "WHERE k.stream = ${stream}\n", "WHERE k.stream = ${stream} AND k.scope = ''\n"),
    tests: [SCOPES],
  },
  {
    name: "idempotency: erasure takes every stream's keys",
    edits: one(ERASE, "WHERE k.stream = ${stream}\n", "WHERE true\n"),
    tests: [ERASURE, SCOPES],
  },
  {
    name: "idempotency: erasure takes the keys of appends made after it began",
    edits: one(
      ERASE,
      "AND k.version <= (CASE WHEN (SELECT count(*) FROM doomed) < ${limit} THEN (SELECT erased_through FROM tomb)",
      "AND k.version <= (CASE WHEN (SELECT count(*) FROM doomed) < ${limit} THEN k.version",
    ),
    tests: [ERASURE],
  },
  {
    name: "idempotency: erasure takes a key before the round that erases its append's last event",
    edits: one(ERASE, "ELSE (SELECT max(version) FROM doomed) END)", "ELSE (SELECT erased_through FROM tomb) END)"),
    tests: [ERASURE],
  },
  {
    name: "idempotency: erasure's last round leaves the keys whose events went before it (retention)",
    edits: one(ERASE, "THEN (SELECT erased_through FROM tomb)\n", "THEN (SELECT max(version) FROM doomed)\n"),
    tests: [ERASURE],
  },
];
