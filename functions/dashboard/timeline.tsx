// GET /ui/timeline — recent batches per key over time.
import type { BatchRecord, SubscriptionStats } from "../../src/index.js";
import { Legend, Timeline } from "./charts.js";
import { Page, num } from "./layout.js";

export const windows = [1, 5, 15] as const;

export function TimelinePage(props: {
  batches: BatchRecord[];
  subscriptions: SubscriptionStats[];
  subscription?: string;
  minutes: number;
  now: number;
}) {
  const counts = { acked: 0, failed: 0, dead: 0, expired: 0 };
  for (const b of props.batches) counts[b.outcome]++;
  return (
    <Page title="Timeline" section="timeline">
      <h1>Timeline</h1>
      <form class="toolbar" method="get" action="/ui/timeline">
        <label for="subscription">Subscription</label>
        <select id="subscription" name="subscription">
          <option value="">all</option>
          {props.subscriptions.map((s) => (
            <option value={s.name} selected={s.name === props.subscription}>
              {s.name}
            </option>
          ))}
        </select>
        <label for="minutes">Window</label>
        <select id="minutes" name="minutes">
          {windows.map((m) => (
            <option value={String(m)} selected={m === props.minutes}>{`${m} min`}</option>
          ))}
        </select>
        <button type="submit">Show</button>
      </form>
      <div id="live">
        <p class="muted">
          {num(props.batches.length)} batches: {num(counts.acked)} acked, {num(counts.failed)} failed,{" "}
          {num(counts.dead)} dead, {num(counts.expired)} lease expired. One row per key (the 40 most recently active); a
          key's batches never overlap, different keys run side by side.
        </p>
        <Legend />
        <Timeline batches={props.batches} from={props.now - props.minutes * 60_000} to={props.now} maxKeys={40} />
      </div>
    </Page>
  );
}
