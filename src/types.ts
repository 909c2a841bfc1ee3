// The public shapes of the library (docs/library.md), by topic in src/types/; this module
// gathers them, so `import type { … } from "./types.js"` and src/index.ts's `export type *` read one place.
import type { TokenScope } from "./tokenScopes.js";
import type { CorqTransaction } from "./db/drizzleTransaction.js";

export type { TokenScope, CorqTransaction };
export type * from "./types/events.js";
export type * from "./types/keyPaths.js";
export type * from "./types/consumeResult.js";
export type * from "./types/inspection.js";
export type * from "./types/tokens.js";
export type * from "./types/retention.js";
export type * from "./types/doctor.js";
export type * from "./types/alerts.js";
export type * from "./types/traceHeaders.js";
export type * from "./types/handler.js";
export type * from "./types/subscriptionDefinition.js";
export type * from "./types/corqOptions.js";
export type * from "./types/corq.js";
export type * from "./types/cells.js";
