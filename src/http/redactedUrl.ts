// A receiver's URL — a push subscription's (GET /subscriptions, /stats, what pause and resume
// answer) or an alert's (the dashboard's /ui/alerts) — as a principal without the admin scope
// sees it: scheme and host (with its port) only. Receivers take their secret in the URL: in
// the query (?token=…), the userinfo, and — relays such as Zapier, Pipedream or n8n — the path
// (/hooks/catch/4711/<capability>/); a read token is handed to dashboards and scripts that have
// no business calling the receiver (issue 47). The host is enough to tell which receiver it is.
export function redactedUrl(text: string): string {
  try {
    const url = new URL(text);
    return `${url.protocol}//${url.host}`;
  } catch {
    return "(redacted)";
  }
}
