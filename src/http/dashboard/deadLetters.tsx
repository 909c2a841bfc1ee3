// GET /ui/dead-letters — dead keys with the event that failed; retry or skip one key or all.
import type { DeadLetter, SubscriptionStats } from "../../index.js";
import { ActionButton, DeadKeyActions, ErrorText, JsonText, Page, When, num, useHref } from "./layout.js";

export function DeadLetters(props: {
  deadLetters: DeadLetter[];
  subscriptions: SubscriptionStats[];
  subscription?: string;
  back: string;
  notice?: string;
}) {
  const href = useHref();
  const withDead = props.subscriptions.filter(
    (s) => s.keys.dead > 0 && (!props.subscription || s.name === props.subscription),
  );
  return (
    <Page title="Dead letters" section="dead-letters" notice={props.notice}>
      <h1>Dead letters{props.subscription ? ` of ${props.subscription}` : ""}</h1>
      <div id="live">
        {withDead.length > 0 && (
          <div class="card">
            {withDead.map((s) => (
              <p class="toolbar">
                <b>{s.name}</b>{" "}
                <span>
                  {num(s.keys.dead)} dead {s.keys.dead === 1 ? "key" : "keys"}
                </span>
                <ActionButton
                  action="retry"
                  subscription={s.name}
                  back={props.back}
                  label={`Retry every dead key of ${s.name}`}
                  primary
                />
                <ActionButton
                  action="skip"
                  subscription={s.name}
                  back={props.back}
                  label={`Skip the failed event of every dead key of ${s.name}`}
                  confirm={`Skip the failed event of every dead key of ${s.name}?`}
                />
                <span class="muted">(all keys)</span>
              </p>
            ))}
          </div>
        )}
        <div class="scroll">
          <table class="cards" aria-label="Dead letters">
            <thead>
              <tr>
                <th>Subscription</th>
                <th>Key</th>
                <th>Event</th>
                <th class="num">Position</th>
                <th>Data</th>
                <th>Error</th>
                <th class="num">Attempts</th>
                <th>Dead since</th>
                <th></th>
              </tr>
            </thead>
            <tbody>
              {props.deadLetters.map((d) => (
                <tr data-key={d.key} data-subscription={d.subscription}>
                  <td data-label="Subscription">{d.subscription}</td>
                  <td data-label="Key">{d.key}</td>
                  <td data-label="Event">
                    {d.event ? (
                      <a href={href(`/ui/streams/${encodeURIComponent(d.event.stream)}`)}>{d.event.name}</a>
                    ) : (
                      "–"
                    )}
                  </td>
                  <td class="num" data-label="Position">
                    {num(d.position)}
                  </td>
                  <td class="wrap" data-label="Data">
                    {d.event && <JsonText value={d.event.data} />}
                  </td>
                  <td class="wrap" data-label="Error">
                    <ErrorText text={d.lastError ?? ""} />
                  </td>
                  <td class="num" data-label="Attempts">
                    {num(d.attempts)}
                  </td>
                  <td data-label="Dead since">
                    <When at={d.deadAt} />
                  </td>
                  <td class="actions">
                    <DeadKeyActions subscription={d.subscription} deadKey={d.key} back={props.back} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        {props.deadLetters.length === 0 && (
          <p class="muted" role="status">
            No dead letters.
          </p>
        )}
      </div>
    </Page>
  );
}
