// One mutant of the mutation check (test/mutants/run.ts): the list is mutants.ts and, per
// feature, the files it gathers.

export interface Edit {
  file: string;
  search: string;
  replace: string;
  /** Replace every occurrence (default: the search text must occur once, and is replaced once). */
  all?: boolean;
}

export interface Mutant {
  name: string;
  edits: Edit[];
  /** Test files that must fail with the mutant applied. */
  tests: string[];
}

export const one = (file: string, search: string, replace: string): Edit[] => [{ file, search, replace }];
