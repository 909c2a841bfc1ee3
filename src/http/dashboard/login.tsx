// GET /login — the token (the admin token, or a scoped one with read, operate or admin) goes into
// a form, never into a URL.
import { Page, useHref } from "./layout.js";

/** `disabled`: why no one can log in (no admin token, or one too short), shown instead of the form. */
export function Login(props: { error?: string; disabled?: string }) {
  const href = useHref();
  return (
    <Page title="Log in" live={false}>
      <div class="card login">
        <h1>corq dashboard</h1>
        {props.error && (
          <p class="error" role="alert">
            {props.error}
          </p>
        )}
        {props.disabled ? (
          <p role="alert">{props.disabled.charAt(0).toUpperCase() + props.disabled.slice(1)}.</p>
        ) : (
          <form method="post" action={href("/login")}>
            <label for="token">Token</label>
            <input id="token" name="token" type="password" autocomplete="current-password" required autofocus />
            <button type="submit" class="primary">
              Log in
            </button>
          </form>
        )}
      </div>
    </Page>
  );
}
