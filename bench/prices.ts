// The public list prices `npm run bench -- --only cost` (bench/cost.ts) prices its measured usage
// with: one place, each with where it was read and when, so anyone can re-price the same
// measurements (change a value here, or multiply the per-event figures in RESULTS.md by their own).
// Marginal prices only: the plans' included usage (Workers Paid: 10M requests and 30M CPU-ms a
// month; the $5 monthly minimums) is left out, as it is shared with everything else an account runs.

export interface Price {
  name: string;
  /** US dollars per `unit` */
  usd: number;
  unit: string;
  source: string;
  /** when the source was read (YYYY-MM-DD) */
  read: string;
  note?: string;
}

const READ = "2026-12-02";
const WORKERS_PRICING = "https://developers.cloudflare.com/workers/platform/pricing/";
const NEON_PLANS = "https://neon.com/docs/introduction/plans";

export const prices = {
  workersRequests: {
    name: "Cloudflare Workers Paid (Standard): requests",
    usd: 0.3,
    unit: "million requests",
    source: WORKERS_PRICING,
    read: READ,
    note: "inbound requests only: the same page says Cloudflare does not bill for subrequests a Worker makes, and the Service bindings page (https://developers.cloudflare.com/workers/runtime-apis/bindings/service-bindings/) that service bindings don't increase costs — so the consumers corq starts through its SELF binding are priced for their CPU time, not as requests",
  },
  workersCpu: {
    name: "Cloudflare Workers Paid (Standard): CPU time",
    usd: 0.02,
    unit: "million CPU milliseconds",
    source: WORKERS_PRICING,
    read: READ,
  },
  neonComputeLaunch: {
    name: "Neon Launch: compute",
    usd: 0.14,
    unit: "CU-hour (1 CU = 1 vCPU, 4 GB)",
    source: NEON_PLANS,
    read: READ,
    note: "neon.com's FAQ pages (e.g. https://neon.com/faqs/serverless-database-services-postgres-charge-per-second) quote $0.106 (Launch) and $0.222 (Scale) per CU-hour: the plans page's figures are used, the higher ones",
  },
  neonComputeScale: {
    name: "Neon Scale: compute",
    usd: 0.26,
    unit: "CU-hour",
    source: NEON_PLANS,
    read: READ,
  },
  neonStorage: {
    name: "Neon Launch and Scale: storage",
    usd: 0.35,
    unit: "GB-month",
    source: NEON_PLANS,
    read: READ,
  },
  neonHistory: {
    name: "Neon Launch and Scale: instant restore (change history)",
    usd: 0.2,
    unit: "GB-month",
    source: NEON_PLANS,
    read: READ,
    note: "priced on the WAL the workload wrote, held for HISTORY_DAYS",
  },
} satisfies Record<string, Price>;

/** Days of change history (the instant-restore window) the WAL is priced for: Launch allows up to 7. */
export const HISTORY_DAYS = 1;
