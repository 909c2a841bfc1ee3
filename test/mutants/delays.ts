// Mutants of delays: maxDelayMs, the order of delayed events, the next due time (gathered by mutants.ts).
import type { Mutant } from "./mutant.js";

export const delaysMutants: Mutant[] = [];
