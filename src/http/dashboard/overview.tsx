// GET / — every subscription at a glance.
import type { SubscriptionStats } from "../../index.js";
import { Sparkline } from "./charts.js";
import { ActionButton, Badge, Figure, Page, about, age, num, useHref } from "./layout.js";

export function Overview(props: {
  subscriptions: SubscriptionStats[];
  log: { head: number | null; events: number; eventsEstimated: boolean };
  throughput: Record<string, number[]>;
  notice?: string;
  /** A Worker without the wake-up binding (src/http/wakeUps.ts): keys due before the next cron wait for it. */
  wakeUpsWaitForCron?: boolean;
}) {
  const dead = props.subscriptions.reduce((sum, s) => sum + s.keys.dead, 0);
  // shown only when some key waits so long: a long delay holds every later event of its key
  const delayed = props.subscriptions.reduce((sum, s) => sum + s.keys.delayedOverHour, 0);
  const pending = props.subscriptions.reduce((sum, s) => sum + s.pending, 0);
  const perSecond = Object.values(props.throughput).reduce((sum, series) => sum + (series.at(-1) ?? 0), 0);
  const href = useHref();
  return (
    <Page title="Overview" section="overview" notice={props.notice}>
      <div id="live">
        <h1>Overview</h1>
        <section class="card figures" aria-label="Totals">
          <Figure label="log head (position)" testid="log-head">
            {num(props.log.head)}
          </Figure>
          <Figure label="events in the log">{about(props.log.events, props.log.eventsEstimated)}</Figure>
          <Figure label="subscriptions">{num(props.subscriptions.length)}</Figure>
          <Figure label="pending events">{num(pending)}</Figure>
          <Figure label="acked, last 10 s">{num(Math.round(perSecond))}/s</Figure>
          <Figure label="dead keys">
            <a href={href("/ui/dead-letters")}>{num(dead)}</a>
          </Figure>
          {delayed > 0 ? (
            <Figure
              label="keys delayed > 1 h"
              title="keys held by a delayed event more than an hour ahead (each subscription caps a delay at its maxDelayMs)"
            >
              {num(delayed)}
            </Figure>
          ) : null}
        </section>
        {props.wakeUpsWaitForCron ? (
          <p class="muted" role="status" data-testid="wake-ups-wait-for-cron">
            Wake-ups wait for the cron: this Worker has no <code>CORQ_WAKE_UPS</code> binding, so a key due before the
            next cron (a backoff, a delay, a rate limit's room, a Retry-After) is delivered at the next cron (every
            minute deployed) or append. docs/deploy.md, "Wake-ups", has the wrangler.toml lines.
          </p>
        ) : null}
        <div class="scroll">
          <table class="cards" aria-label="Subscriptions">
            <thead>
              <tr>
                <th>Subscription</th>
                <th>Kind</th>
                <th class="num">Lag</th>
                <th class="num">Pending</th>
                <th class="num">Ready</th>
                <th class="num">Leased</th>
                <th class="num">Backoff</th>
                <th class="num">Dead</th>
                <th class="num">Oldest pending</th>
                <th>Events/s (5 min)</th>
                <th>State</th>
              </tr>
            </thead>
            <tbody>
              {props.subscriptions.map((s) => (
                <tr data-subscription={s.name}>
                  <td data-label="Subscription">
                    <a href={href(`/ui/subscriptions/${encodeURIComponent(s.name)}`)}>{s.name}</a>
                  </td>
                  <td data-label="Kind">{s.kind}</td>
                  <td class="num" data-label="Lag" data-testid="lag">
                    {about(s.lag, s.lagEstimated)}
                  </td>
                  <td class="num" data-label="Pending" data-testid="pending">
                    {num(s.pending)}
                  </td>
                  <td class="num" data-label="Ready">
                    {num(s.keys.ready)}
                  </td>
                  <td class="num" data-label="Leased">
                    {num(s.keys.leased)}
                  </td>
                  <td class="num" data-label="Backoff">
                    {num(s.keys.backoff)}
                  </td>
                  <td class="num" data-label="Dead" data-testid="dead">
                    {s.keys.dead > 0 ? (
                      <a href={href(`/ui/dead-letters?subscription=${encodeURIComponent(s.name)}`)}>
                        {num(s.keys.dead)}
                      </a>
                    ) : (
                      "0"
                    )}
                  </td>
                  <td class="num" data-label="Oldest pending">
                    {age(s.oldestPendingAgeMs)}
                  </td>
                  <td data-label="Events/s (5 min)">
                    <Sparkline
                      values={props.throughput[s.name] ?? []}
                      label={`${s.name}: events acked per second over the last 5 minutes`}
                    />
                  </td>
                  <td class="actions" data-label="State">
                    {s.paused ? <Badge kind="paused">paused</Badge> : <Badge kind="ready">running</Badge>}{" "}
                    <ActionButton
                      action={s.paused ? "resume" : "pause"}
                      subscription={s.name}
                      back={href("/")}
                      label={`${s.paused ? "Resume" : "Pause"} ${s.name}`}
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        {props.subscriptions.length === 0 && <p class="muted">No subscriptions yet.</p>}
      </div>
    </Page>
  );
}
