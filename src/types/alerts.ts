// Alerts (docs/operations.md, "Alerts"; docs/http-api.md, "Alerts"): signed POSTs when a key dies,
// a subscription falls behind, an advance fails or a transaction holds the xmin horizon.

/** What an alert watches for. */
export type AlertCondition = "key.dead" | "subscription.lag" | "advance.failed" | "horizon.held";

/** What putAlert and PUT /alerts/:name take. */
export interface AlertInput {
  /** Where each alert is POSTed (http: or https:; a private address only with pushAllowPrivate). */
  url: string;
  /** The Standard Webhooks signing secret; left out: a `whsec_` one is made (and kept on a replace). */
  secret?: string;
  on: AlertCondition[];
  /** subscription.lag: alert when a subscription has more than this many events not handled (default 1,000). */
  lagOver?: number;
  /** horizon.held: alert when a transaction has held the xmin horizon longer than this, in ms (default 60,000). */
  heldOverMs?: number;
  /** At most one alert per condition type and subject (a key, a subscription, a transaction) this often; default 10 minutes. */
  minIntervalMs?: number;
}

/** The newest send of an alert. */
export interface AlertSend {
  type: AlertCondition;
  subscription?: string;
  key?: string;
  /** When the condition was seen (the payload's `at`). */
  at: string;
  /** When the receiver took it (a 2xx); null while it is retried, or once it was given up. */
  sentAt: string | null;
  attempts: number;
  /** Why the last attempt failed (a status or a short reason); null once sent. */
  error: string | null;
  /** false: the retries are over and it was not sent. */
  retrying: boolean;
}

/** An alert as listed (Corq.alerts, GET /alerts): never its secret. */
export interface AlertInfo {
  name: string;
  url: string;
  on: AlertCondition[];
  /** Set when `on` has subscription.lag. */
  lagOver: number | null;
  /** Set when `on` has horizon.held. */
  heldOverMs: number | null;
  minIntervalMs: number;
  /** Alerts the receiver took, and alerts given up after their retries. */
  sent: number;
  failed: number;
  lastSend: AlertSend | null;
  createdAt: string;
  updatedAt: string;
}

/** What putAlert answers: `secret` only when the alert was created (shown this once). */
export interface AlertPut {
  created: boolean;
  alert: AlertInfo;
  secret?: string;
}

/**
 * The body of an alert's POST. key.dead: subscription, key, position (the event that failed),
 * error (its last error), at (when the key died); subscription.lag: subscription, lag (events
 * not handled yet), at; advance.failed: subscription, error, at (when the advance failed);
 * horizon.held: error (what holds it, by pid, and for how long), at.
 */
export interface AlertPayload {
  type: AlertCondition;
  subscription?: string;
  key?: string;
  position?: number;
  error?: string;
  lag?: number;
  at: string;
}

/** One pass of Corq.checkAlerts. */
export interface AlertCheck {
  /** Alerts the pass evaluated (0: there are none; nothing else was read). */
  alerts: number;
  /** Sends the receivers took in this pass. */
  sent: number;
  /** Sends that failed and are retried later (with backoff). */
  retrying: number;
  /** Sends that failed their last attempt: given up. */
  failed: number;
}
