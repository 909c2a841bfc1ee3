// A push subscription's URL as a token without the admin scope sees it (GET /subscriptions,
// /stats): receivers often take their secret in the URL (?token=…, user:password@), and a read
// token is handed to dashboards and scripts that have no business calling the receiver.
// Scheme, host and path stay: enough to tell which receiver it is.
export function redactedUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return "(redacted)";
  }
  if (url.username !== "") url.username = "redacted";
  if (url.password !== "") url.password = "redacted";
  const names = [...url.searchParams.keys()];
  if (names.length > 0) url.search = new URLSearchParams(names.map((name) => [name, "redacted"])).toString();
  if (url.hash !== "") url.hash = "redacted";
  return url.toString();
}
