// Mutants of retention, erasure, idle-key compaction (gathered by mutants.ts).
import type { Mutant } from "./mutant.js";

export const lifecycleMutants: Mutant[] = [];
