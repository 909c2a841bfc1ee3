// GET /ui/timeline — recent batches per key over time.
import type { SubscriptionStats, TimelineData } from "../../index.js";
import { Legend, Timeline } from "./charts.js";
import { Page, num, useHref, utc } from "./layout.js";

export const windows = [1, 5, 15] as const;
export const TIMELINE_KEYS = 40;

export function TimelinePage(props: {
  timeline: TimelineData;
  subscriptions: SubscriptionStats[];
  subscription?: string;
  minutes: number;
  now: number;
}) {
  const { counts, bars } = props.timeline;
  const total = counts.acked + counts.failed + counts.dead + counts.expired;
  const from = props.now - props.minutes * 60_000;
  return (
    <Page title="Timeline" section="timeline">
      <h1>Timeline</h1>
      <form class="toolbar" method="get" action={useHref()("/ui/timeline")}>
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
          {num(total)} batches: {num(counts.acked)} acked, {num(counts.failed)} failed, {num(counts.dead)} dead,{" "}
          {num(counts.expired)} lease expired, from{" "}
          <time datetime={new Date(from).toISOString()}>{utc(new Date(from).toISOString())}</time> to{" "}
          <time datetime={new Date(props.now).toISOString()}>{utc(new Date(props.now).toISOString())}</time> (now). One
          row per key (the {TIMELINE_KEYS} most recently active, in key order); a key's batches never overlap, different
          keys run side by side; close batches of a key share one bar.
        </p>
        <Legend />
        <div class="scroll">
          <Timeline batches={bars} from={from} to={props.now} maxKeys={TIMELINE_KEYS} />
        </div>
      </div>
    </Page>
  );
}
