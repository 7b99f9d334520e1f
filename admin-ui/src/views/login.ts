import { Code, ConnectError } from "@connectrpc/connect";

import { identity } from "../api";
import { h, replace } from "../dom";
import { alertSlot, errorBox, field } from "../ui";

export interface LoginOptions {
  message?: string | undefined;
  onLoggedIn: (username: string) => void;
}

/** IdentityService.AdminLogin: the answer sets the httpOnly session cookie. */
export function loginView(opts: LoginOptions): HTMLElement {
  const username = h("input", { name: "username", autocomplete: "username", required: true, maxlength: 128, autocapitalize: "none", spellcheck: "false" });
  const password = h("input", { name: "password", type: "password", autocomplete: "current-password", required: true, minlength: 8, maxlength: 128 });
  const submit = h("button", { type: "submit", class: "primary" }, "Log in");
  const errors = alertSlot();
  const form = h(
    "form",
    { class: "login-form", "aria-labelledby": "login-title", novalidate: true },
    h("h1", { id: "login-title" }, "paymentd admin"),
    opts.message ? h("p", { class: "notice", role: "status" }, opts.message) : null,
    field("Username", username),
    field("Password", password),
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
      const res = await identity.adminLogin({ username: username.value.trim(), password: password.value });
      password.value = "";
      opts.onLoggedIn(res.admin?.username ?? username.value.trim());
    } catch (err) {
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
