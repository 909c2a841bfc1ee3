# The self-hosted Node runtime (docs/self-hosting.md): `npm run serve` on the Postgres at
# DATABASE_URL — the HTTP API, the dashboard, the advancer and the consumers in one process.
# Built from the commands CI runs (`npm ci`, then the `serve` script); not built in CI (no
# container runtime or registry there), so keep it this small.
FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
# all dependencies, as CI installs them: `serve` runs the TypeScript sources through tsx
RUN npm ci --no-audit --no-fund
COPY . .
ENV HOST=0.0.0.0 PORT=8787
USER node
EXPOSE 8787
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s \
  CMD ["node", "-e", "fetch('http://127.0.0.1:8787/health').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# what `npm run serve` runs, without npm in between: SIGTERM reaches the process itself
CMD ["node", "--import", "tsx", "infra/serve.ts"]
