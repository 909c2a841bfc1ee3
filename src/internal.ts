// The runtimes' entry (functions/, src/node/, src/http/): createCorq with the machinery the
// dispatcher and the runner drive (src/runtimeTypes.ts). Users import src/index.ts, whose Corq
// has none of it.
export { createCorqRuntime, DEFAULT_KEYS_PER_CLAIM, MAX_KEYS_PER_CLAIM } from "./corq.js";
export type { CorqRuntime } from "./runtimeTypes.js";
export { createCellsRuntime } from "./cells/createCells.js";
