// `npm run openapi`: writes docs/openapi.json from the route table (src/http/openapi.ts);
// test/openapi.test.ts fails while the committed file is stale.
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { openApiDocument } from "../src/http/openapi.js";

const file = fileURLToPath(new URL("../docs/openapi.json", import.meta.url));
writeFileSync(file, `${JSON.stringify(openApiDocument(), null, 2)}\n`);
console.log("wrote docs/openapi.json");
