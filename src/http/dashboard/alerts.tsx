// GET /ui/alerts — the alerts, what each watches, and what it sent last (docs/operations.md, "Alerts").
// Read-only: alerts are put and deleted over the API (admin). A session without the admin scope
// sees each receiver as scheme and host only (src/http/redactedUrl.ts: relays keep their
// capability in the path), as GET /subscriptions shows push URLs to a read token.
import type { AlertInfo, AlertSend } from "../../index.js";
import { Badge, ErrorText, Page, When, num } from "./layout.js";

const watched = (alert: AlertInfo) =>
  alert.on.map((condition) =>
    condition === "subscription.lag"
      ? `${condition} over ${num(alert.lagOver)} events`
      : condition === "horizon.held"
        ? `${condition} over ${num(alert.heldOverMs)} ms`
        : condition,
  );

function LastSend(props: { send: AlertSend | null }) {
  const { send } = props;
  if (send === null) return <span class="muted">none yet</span>;
  const about = [send.subscription, send.key].filter((part) => part !== undefined).join(" / ");
  return (
    <>
      <b>{send.type}</b>
      {about && ` ${about}`}
      <br />
      {send.sentAt !== null ? (
        <>
          <Badge kind="ready">sent</Badge> <When at={send.sentAt} />
        </>
      ) : (
        <>
          <Badge kind={send.retrying ? "backoff" : "dead"}>{send.retrying ? "retrying" : "given up"}</Badge> after{" "}
          {num(send.attempts)} {send.attempts === 1 ? "try" : "tries"}: <ErrorText text={send.error ?? ""} />
        </>
      )}
    </>
  );
}

/** `redacted`: the receivers' URLs are scheme and host only (a session below admin). */
export function Alerts(props: { alerts: AlertInfo[]; redacted: boolean }) {
  return (
    <Page title="Alerts" section="alerts">
      <h1>Alerts</h1>
      <div id="live">
        <div class="scroll">
          <table class="cards" aria-label="Alerts">
            <thead>
              <tr>
                <th>Alert</th>
                <th>Watches</th>
                <th>Receiver</th>
                <th class="num">Sent</th>
                <th class="num">Given up</th>
                <th>Last send</th>
              </tr>
            </thead>
            <tbody>
              {props.alerts.map((alert) => (
                <tr data-alert={alert.name}>
                  <td data-label="Alert">{alert.name}</td>
                  <td data-label="Watches">
                    {watched(alert).join(", ")}
                    <br />
                    <span class="muted">at most once per {num(alert.minIntervalMs)} ms each</span>
                  </td>
                  <td class="wrap" data-label="Receiver">
                    {alert.url}
                  </td>
                  <td class="num" data-label="Sent">
                    {num(alert.sent)}
                  </td>
                  <td class="num" data-label="Given up">
                    {num(alert.failed)}
                  </td>
                  <td class="wrap" data-label="Last send">
                    <LastSend send={alert.lastSend} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        {props.redacted && props.alerts.length > 0 && (
          <p class="muted">Receivers are shown as scheme and host: the rest of their URLs is for admin sessions.</p>
        )}
        {props.alerts.length === 0 && (
          <p class="muted" role="status">
            No alerts. PUT /alerts/:name (or corq alerts put) makes one.
          </p>
        )}
      </div>
    </Page>
  );
}
