// GET /login — the admin token goes into a form, never into a URL.
import { Page } from "./layout.js";

export function Login(props: { error?: string; disabled?: boolean }) {
  return (
    <Page title="Log in" live={false}>
      <div class="card login">
        <h1>corq dashboard</h1>
        {props.error && <p class="error" role="alert">{props.error}</p>}
        {props.disabled ? (
          <p>The dashboard is disabled: set <code>CORQ_ADMIN_TOKEN</code> (<code>wrangler secret put CORQ_ADMIN_TOKEN</code>).</p>
        ) : (
          <form method="post" action="/login">
            <label for="token">Admin token</label>
            <input id="token" name="token" type="password" autocomplete="current-password" required autofocus />
            <button type="submit" class="primary">Log in</button>
          </form>
        )}
      </div>
    </Page>
  );
}
