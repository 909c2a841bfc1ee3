// Mutants of alerts and the dashboard: receivers below admin, payloads (gathered by mutants.ts).
import type { Mutant } from "./mutant.js";

export const alertsMutants: Mutant[] = [];
