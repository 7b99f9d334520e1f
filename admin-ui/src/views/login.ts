import { Code, ConnectError } from "@connectrpc/connect";

import { identity } from "../api";
import { h, replace } from "../dom";
import { alertSlot, errorBox, field } from "../ui";

export interface LoginOptions {
  message?: string | undefined;
  onLoggedIn: (username: string) => void;
}

/** The reason of AdminLogin's ErrorInfo detail ("totp_required",
 * "totp_invalid"), "" without one. ErrorInfo's reason is its field 1, so the
 * bytes read 0x0a, a one-byte length, the reason. */
export function loginReason(err: unknown): string {
  for (const d of ConnectError.from(err).details) {
    if (!("type" in d) || d.type !== "google.rpc.ErrorInfo") continue;
    const v = d.value;
    if (v.length >= 2 && v[0] === 0x0a && v[1]! < 0x80 && v.length >= 2 + v[1]!) {
      return new TextDecoder().decode(v.subarray(2, 2 + v[1]!));
    }
  }
  return "";
}

/** IdentityService.AdminLogin: the answer sets the httpOnly session cookie.
 * An admin with two-factor sign-in is asked for the code (or a recovery
 * code) once the service answers that it needs one. */
export function loginView(opts: LoginOptions): HTMLElement {
  const username = h("input", { name: "username", autocomplete: "username", required: true, maxlength: 128, autocapitalize: "none", spellcheck: "false" });
  const password = h("input", { name: "password", type: "password", autocomplete: "current-password", required: true, minlength: 8, maxlength: 128 });
  const code = h("input", { name: "totp_code", autocomplete: "one-time-code", inputmode: "text", maxlength: 32, size: 20, spellcheck: "false" });
  const codeField = field("Two-factor code", code, "The 6-digit code of your authenticator app, or one of your recovery codes.");
  codeField.hidden = true;
  const submit = h("button", { type: "submit", class: "primary" }, "Log in");
  const errors = alertSlot();
  const form = h(
    "form",
    { class: "login-form", "aria-labelledby": "login-title", novalidate: true },
    h("h1", { id: "login-title" }, "paymentd admin"),
    opts.message ? h("p", { class: "notice", role: "status" }, opts.message) : null,
    field("Username", username),
    field("Password", password),
    codeField,
    errors,
    submit,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    if (!username.value.trim() || !password.value) {
      replace(errors, h("div", { class: "error", role: "alert" }, "Enter your username and password."));
      (username.value.trim() ? password : username).focus();
      return;
    }
    submit.disabled = true;
    submit.setAttribute("aria-busy", "true");
    replace(errors);
    try {
      const res = await identity.adminLogin({ username: username.value.trim(), password: password.value, totpCode: code.value.trim() });
      password.value = "";
      code.value = "";
      opts.onLoggedIn(res.admin?.username ?? username.value.trim());
    } catch (err) {
      const why = loginReason(err);
      if (why === "totp_required" || why === "totp_invalid") {
        codeField.hidden = false;
        replace(
          errors,
          h("div", { class: "error", role: "alert" }, why === "totp_required" ? "Enter your two-factor code." : "That code is not right, or was used already."),
        );
        code.select();
        code.focus();
        return;
      }
      // AdminLogin answers the same Unauthenticated for an unknown user and
      // a wrong password.
      replace(
        errors,
        ConnectError.from(err).code === Code.Unauthenticated ? h("div", { class: "error", role: "alert" }, "Wrong username or password.") : errorBox(err),
      );
      password.select();
      password.focus();
    } finally {
      submit.disabled = false;
      submit.removeAttribute("aria-busy");
    }
  });
  queueMicrotask(() => username.focus());
  return h("div", { class: "login-page" }, h("main", { id: "main" }, form));
}
