// The commands of `corq` (cli/main.ts), callable in-process (tests).
export interface Io {
  env: Record<string, string | undefined>;
  out: { write(text: string): unknown };
  err: { write(text: string): unknown };
}

export const usage = `usage: corq <command> [options]\n`;

export async function run(argv: string[], io: Io): Promise<number> {
  if (argv.length === 0 || argv.includes("--help") || argv.includes("-h")) {
    io.out.write(usage);
    return 0;
  }
  io.err.write(usage);
  return 2;
}
