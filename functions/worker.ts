// This repository's Worker: corq around the example app (functions/app.ts). A Worker of your
// own is the same line with your app (README, "Your own Worker").
import { app } from "./app.js";
import { createWorker } from "./createWorker.js";

export default createWorker(app);
// keys due before the next cron are dispatched at their time (wrangler.toml binds it as CORQ_WAKE_UPS)
export { CorqWakeUps } from "./createWorker.js";
