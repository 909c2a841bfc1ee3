// Bounded waits: a regression must fail its test fast with a message that says what never
// happened, not hang until the 30-second test timeout (which names no cause).

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs `check` until it resolves (every `intervalMs`); after `timeoutMs` its last error is thrown. */
export async function eventually<T>(check: () => Promise<T>, { timeoutMs = 15_000, intervalMs = 50 } = {}): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await sleep(intervalMs);
    }
  }
}

/** Polls `condition` every `everyMs` (default 5) until it holds; throws `message` after `timeoutMs` (default 5 s). */
export async function until(
  condition: () => boolean | Promise<boolean>,
  options: { timeoutMs?: number; everyMs?: number; message: string },
): Promise<void> {
  const timeoutMs = options.timeoutMs ?? 5000;
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() >= deadline) throw new Error(`${options.message} (waited ${timeoutMs} ms)`);
    await sleep(options.everyMs ?? 5);
  }
}

/** `promise`, or an error with `message` if it has not settled after `timeoutMs` (default 10 s). */
export async function within<T>(promise: Promise<T>, options: { timeoutMs?: number; message: string }): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${options.message} (still running after ${timeoutMs} ms)`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
