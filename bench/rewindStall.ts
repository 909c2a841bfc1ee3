// Another subscription's delivery while one subscription is rewound (issue 30, item 4): a log
// of N events over K keys that subscription "rewound" has advanced past, then live single-event
// appends at a fixed rate that only subscription "other" takes (bench/liveProbe.ts: its own
// instance advances and drains it, as a process of its own would). Measured, append→handler of
// the live events:
//   baseline   nothing rewound;
//   rewind     while `rewind("rewound", { to: "beginning" })` runs (N events requeued).
// Beside it, the oldest transaction holding a transaction id (liveProbe.ts). Nobody consumes
// "rewound": the figure is what the rewind itself costs the others.
import { createCorq, type SubscriptionDefinition } from "../src/index.js";
import { loadLogWithoutSubscriptions } from "./systems/corq.js";
import { startLiveProbe, type LivePhase } from "./liveProbe.js";
import { present } from "../test/helpers/present.js";

export interface RewindStallOptions {
  events: number;
  keys: number;
  /** Live appends per second (to "other"). */
  rate: number;
  baselineSeconds: number;
}

export type StallPhase = LivePhase;

export async function rewindStall(databaseUrl: string, o: RewindStallOptions) {
  // the log first, with no subscription: the subscription rewound is created `from: "now"`
  await loadLogWithoutSubscriptions(databaseUrl, { events: o.events, keys: o.keys });

  const rewound: SubscriptionDefinition = {
    name: "rewound",
    key: "data.key",
    events: ["Work"],
    from: "now",
    handle: () => undefined,
  };
  // the rewind's statements one after another: each one's time is the gap to the next one sent
  const sent: { at: number; text: string }[] = [];
  const operator = createCorq({
    databaseUrl,
    subscriptions: [rewound],
    poolSize: 2,
    onStatement: (text) => void sent.push({ at: performance.now(), text }),
  });
  await operator.migrate();
  await operator.advance(); // "rewound" exists, its watermark past the log
  const probe = await startLiveProbe(databaseUrl, { name: "other", rate: o.rate });

  try {
    const baseline = await probe.phase(o.baselineSeconds, () => true);
    let rewindMs = 0;
    let requeued = 0;
    let ended = false;
    const rewinding = (async () => {
      const t0 = performance.now();
      requeued = (await operator.rewind("rewound", { to: "beginning" })).requeued;
      rewindMs = performance.now() - t0;
    })().finally(() => {
      ended = true;
    });
    const first = sent.length;
    const during = await probe.phase(1, () => ended);
    await rewinding;
    // the rewind call's statements: the longest (the gap to the next one sent), and the count
    const calls = sent.slice(first);
    let longestStatementMs = 0;
    let longestStatement = "";
    for (let i = 0; i + 1 < calls.length; i++) {
      const gap = present(calls[i + 1], "the next statement").at - present(calls[i], "a statement").at;
      if (gap > longestStatementMs) {
        longestStatementMs = gap;
        longestStatement = present(calls[i], "a statement").text.replace(/\s+/g, " ").slice(0, 80);
      }
    }
    return { baseline, during, rewindMs, requeued, statements: calls.length, longestStatementMs, longestStatement };
  } finally {
    await probe.stop();
    await operator.close();
  }
}
