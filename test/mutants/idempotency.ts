// Mutants of idempotent appends: scopes, erasure, the in-flight check (gathered by mutants.ts).
import type { Mutant } from "./mutant.js";

export const idempotencyMutants: Mutant[] = [];
