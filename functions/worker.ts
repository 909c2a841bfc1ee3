// This repository's Worker: corq around the example app (functions/app.ts). A Worker of your
// own is the same line with your app (README, "Your own Worker").
import { app } from "./app.js";
import { createWorker } from "./createWorker.js";

export default createWorker(app);
