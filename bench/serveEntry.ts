// The `serve` process of the Node-runtime benchmark (bench/serve.ts): one code subscription,
// "bench" (key: data.key, as the library loop's latency benchmark), whose handler does nothing but print, for every event, its
// position, the moment it was handled (the system clock in ms, to a microsecond) and the
// event's createdAt (the database clock when its append began), which the benchmark compares
// with when the append was due. With BENCH_HOLD=1 the handler prints that it started and then
// holds its batch until its signal aborts (a graceful stop), then gives up.
import { startServe, stopOnSignals } from "../src/node/serve.js";

const hold = process.env.BENCH_HOLD === "1";
const at = () => (performance.timeOrigin + performance.now()).toFixed(3);

const running = await startServe({
  subscriptions: [
    {
      name: "bench",
      key: "data.key",
      async handle(events, ctx) {
        if (hold) {
          process.stdout.write(`S ${ctx.key} ${at()}\n`);
          await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve, { once: true }));
          throw new Error("stopping");
        }
        const handled = at();
        process.stdout.write(
          events.map((e) => `H ${e.position} ${handled} ${Date.parse(e.createdAt)} ${ctx.key}\n`).join(""),
        );
      },
    },
  ],
  log: (line) => console.error(`corq: ${line}`),
});
stopOnSignals(running, (line) => console.error(`corq: ${line}`));
console.log(`corq ready ${running.url || `(${running.role}: no HTTP)`}`);
