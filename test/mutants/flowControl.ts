// Mutants of fairness between tenants, caps, rate limits (gathered by mutants.ts).
import type { Mutant } from "./mutant.js";

export const flowControlMutants: Mutant[] = [];
