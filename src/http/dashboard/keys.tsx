// GET /ui/subscriptions/:name — the keys of one subscription, filtered by status, keyset-paged.
import type { KeyState, KeyStatus, SubscriptionStats } from "../../index.js";
import {
  ActionButton,
  about,
  Badge,
  DeadKeyActions,
  Figure,
  KeepTimes,
  Page,
  Relative,
  RewindForm,
  age,
  num,
  useHref,
} from "./layout.js";

const statuses: KeyStatus[] = ["ready", "leased", "backoff", "dead", "paused", "idle"];

export function Keys(props: {
  subscription: SubscriptionStats;
  keys: KeyState[];
  status?: KeyStatus;
  after?: string;
  /** The cursor of the next page (Corq.keyPage), null on the last. */
  next: string | null;
  back: string;
  notice?: string;
}) {
  const s = props.subscription;
  const href = useHref();
  const base = href(`/ui/subscriptions/${encodeURIComponent(s.name)}`);
  const query = (after?: string) =>
    `${base}?${new URLSearchParams({ ...(props.status ? { status: props.status } : {}), ...(after ? { after } : {}) })}`;
  const now = Date.now();
  // the Tenant column: only where the subscription shares its claims between tenants
  const tenanted = s.tenant !== null;
  return (
    <Page title={s.name} section="overview" notice={props.notice}>
      <h1>
        {s.name}{" "}
        <span class="muted">
          ({s.kind}, key: <code>{s.key}</code>, events: <code>{s.events.join(", ")}</code>
          {s.streams === null ? (
            ""
          ) : (
            <>
              , streams: <code>{s.streams.join(", ")}</code>
            </>
          )}
          {s.tenant === null ? (
            ""
          ) : (
            <>
              , tenant: <code>{s.tenant}</code>
              {s.tenantWeights === null || Object.keys(s.tenantWeights).length === 0 ? (
                ""
              ) : (
                <>
                  , tenant weights: <code>{weights(s.tenantWeights)}</code>
                </>
              )}
            </>
          )}
          )
        </span>
      </h1>
      <div id="live">
        <div class="card figures">
          <Figure label="lag">{about(s.lag, s.lagEstimated)}</Figure>
          <Figure label="pending">{num(s.pending)}</Figure>
          <Figure label="ready">{num(s.keys.ready)}</Figure>
          <Figure label="leased">{num(s.keys.leased)}</Figure>
          <Figure label="backoff">{num(s.keys.backoff)}</Figure>
          <Figure
            label={s.keys.waitingUntil ? `waiting (next ${s.keys.waitingUntil.slice(11, 19)} UTC)` : "waiting"}
            title="keys waiting for a delayed event, a come-back-later answer or a rate limit (no failed attempt)"
          >
            {num(s.keys.waiting)}
          </Figure>
          <Figure
            label="delayed > 1 h"
            title={`keys held by a delayed event more than an hour ahead; this subscription caps a delay at ${num(s.maxDelayMs)} ms (maxDelayMs)`}
          >
            {num(s.keys.delayedOverHour)}
          </Figure>
          {s.maxLeasedKeys !== null ? (
            <Figure
              label="in flight / cap"
              title="maxLeasedKeys: at most this many keys in flight at once, across every consumer"
            >
              {num(s.keys.leased)} / {num(s.maxLeasedKeys)}
            </Figure>
          ) : null}
          {s.maxLeasedKeysPerTenant !== null ? (
            <Figure
              label="cap per tenant"
              title="maxLeasedKeysPerTenant: at most this many keys of each tenant in flight at once"
            >
              {num(s.maxLeasedKeysPerTenant)}
            </Figure>
          ) : null}
          {s.rateLimit !== null ? (
            <Figure label={`rate limit by ${s.rateLimit.by}`} title={rateLimitTitle(s.rateLimit)}>
              {num(s.rateLimit.events)} / {num(s.rateLimit.perMs)} ms
              {s.rateLimit.burst > 1 ? `, burst ${num(s.rateLimit.burst)}` : ""}
            </Figure>
          ) : null}
          {s.tenant !== null ? (
            <Figure
              label="tenant mismatches"
              title="events that named another tenant than their key's (a key keeps the tenant of the event that made it)"
            >
              {num(s.tenantMismatched)}
            </Figure>
          ) : null}
          <Figure label="dead">{num(s.keys.dead)}</Figure>
          <Figure label="paused keys">{num(s.keys.paused)}</Figure>
          <Figure label="oldest pending">{age(s.oldestPendingAgeMs)}</Figure>
          <Figure
            label={
              <ActionButton
                action={s.paused ? "resume" : "pause"}
                subscription={s.name}
                back={props.back}
                label={`${s.paused ? "Resume" : "Pause"} ${s.name}`}
              />
            }
          >
            {s.paused ? <Badge kind="paused">paused</Badge> : <Badge kind="ready">running</Badge>}
          </Figure>
        </div>
      </div>
      <form class="toolbar" method="get" action={base}>
        <label for="status">Status</label>
        <select id="status" name="status">
          <option value="">any</option>
          {statuses.map((status) => (
            <option value={status} selected={status === props.status}>
              {status}
            </option>
          ))}
        </select>
        <button type="submit">Filter</button>
        <a href={href(`/ui/timeline?subscription=${encodeURIComponent(s.name)}`)}>Timeline</a>
      </form>
      <div class="toolbar">
        <RewindForm
          subscription={s.name}
          back={props.back}
          label={s.name}
          caption="Deliver again from a position (or beginning), every key:"
        />
      </div>
      <div class="scroll">
        <table class="cards" aria-label={`Keys of ${s.name}`}>
          <thead>
            <tr>
              <th>Key</th>
              {tenanted && <th>Tenant</th>}
              <th>Status</th>
              <th class="num">Pending</th>
              <th class="num">Attempts</th>
              <th>Next attempt</th>
              <th class="num">Last position</th>
              <th>Holder</th>
              <th>Why</th>
              <th></th>
            </tr>
          </thead>
          <tbody>
            {props.keys.map((k) => (
              <tr data-key={k.key}>
                <td data-label="Key">
                  {s.key === "stream" ? <a href={href(`/ui/streams/${encodeURIComponent(k.key)}`)}>{k.key}</a> : k.key}
                </td>
                {tenanted && (
                  <td class="wrap" data-label="Tenant">
                    {tenantOf(k)}
                  </td>
                )}
                <td data-label="Status">
                  <Badge kind={k.status}>{k.status}</Badge>
                </td>
                <td class="num" data-label="Pending">
                  {num(k.pending)}
                </td>
                <td class="num" data-label="Attempts">
                  {num(k.attempts)}
                </td>
                <td data-label="Next attempt">
                  {k.availableAt === null || k.status === "paused" || k.status === "dead" ? (
                    "–"
                  ) : (
                    <Relative at={k.availableAt}>{nextAttempt(Date.parse(k.availableAt) - now)}</Relative>
                  )}
                </td>
                <td class="num" data-label="Last position">
                  {num(k.lastPosition)}
                </td>
                <td class="wrap holder" data-label="Holder">
                  {k.holder != null && (
                    <>
                      {k.holder}
                      {k.leasedSince && (
                        <span class="muted">
                          {" "}
                          since <Relative at={k.leasedSince}>{age(now - Date.parse(k.leasedSince))}</Relative> ago
                        </span>
                      )}
                    </>
                  )}
                </td>
                <td class="wrap why" data-label="Why">
                  <KeepTimes text={k.reason} />
                </td>
                <td class="actions">
                  <div class="actions">
                    {k.status === "dead" && <DeadKeyActions subscription={s.name} deadKey={k.key} back={props.back} />}
                    <ActionButton
                      action={k.status === "paused" ? "resume-key" : "pause-key"}
                      subscription={s.name}
                      deadKey={k.key}
                      back={props.back}
                      label={`${k.status === "paused" ? "Resume" : "Pause"} key ${k.key}`}
                      text={k.status === "paused" ? "Resume" : "Pause"}
                    />
                    <RewindForm subscription={s.name} rewindKey={k.key} back={props.back} label={`key ${k.key}`} />
                  </div>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {props.keys.length === 0 && (
        <p class="muted">
          No keys{props.status ? ` with status ${props.status}` : ""}
          {props.after ? " after this one" : ""}.
        </p>
      )}
      <p class="toolbar">
        {props.after !== undefined && <a href={query()}>First page</a>}
        {props.next !== null && (
          <a href={query(props.next)} rel="next">
            Next page
          </a>
        )}
      </p>
    </Page>
  );
}

/** What a rate limit lets the receiver see, as docs/flow-control.md says it (the headline and the table). */
function rateLimitTitle(limit: NonNullable<SubscriptionStats["rateLimit"]>): string {
  const gap = Math.round((limit.perMs / limit.events) * 10) / 10;
  const spacing =
    limit.burst > 1
      ? `up to ${limit.burst} at once, one every ${gap} ms after: at most ${limit.events}`
      : `one every ${gap} ms: at most ${limit.events}`;
  return `rateLimit: deliveries start ${spacing} in any ${limit.perMs} ms at the receiver; keys over it wait for its room (no attempt counted) and count among the waiting keys`;
}

const nextAttempt = (inMs: number) => (inMs <= 0 ? "now" : `in ${age(inMs)}`);

/** tenantWeights as "acme: 3, beta: 2" (by tenant). */
const weights = (byTenant: Record<string, number>) =>
  Object.entries(byTenant)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([tenant, weight]) => `${tenant}: ${weight}`)
    .join(", ");

/** A key's tenant: "" is an event that named none; none at all, a key made before the subscription had a tenant. */
function tenantOf(k: KeyState) {
  if (k.tenant === undefined) return <span class="muted">–</span>;
  if (k.tenant === "") return <span class="muted">none named</span>;
  return k.tenant;
}
