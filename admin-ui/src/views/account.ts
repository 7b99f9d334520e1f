import { identity } from "../api";
import { h, replace } from "../dom";
import type { RouteContext } from "../router";
import { alertSlot, announce, busy, field, pageTitle } from "../ui";

/** The signed-in admin's own account: IdentityService.ChangePassword. The
 * answer sets a new session cookie; every other session of the admin ends. */
export function accountView(_: RouteContext): HTMLElement {
  const current = h("input", { name: "current_password", type: "password", autocomplete: "current-password", required: true, maxlength: 128 });
  const next = h("input", { name: "new_password", type: "password", autocomplete: "new-password", required: true, minlength: 8, maxlength: 128 });
  const again = h("input", { name: "new_password_again", type: "password", autocomplete: "new-password", required: true, minlength: 8, maxlength: 128 });
  const submit = h("button", { type: "submit", class: "primary" }, "Change password");
  const errors = alertSlot();
  const done = h("div");
  const form = h(
    "form",
    { class: "action-form", "aria-label": "Change password", novalidate: true },
    h("h2", null, "Change password"),
    h("p", { class: "hint" }, "Every other session of yours ends, on every instance; this one goes on."),
    field("Current password", current),
    field("New password", next, "8 to 128 characters."),
    field("New password again", again),
    errors,
    submit,
  );
  const fail = (text: string, focus: HTMLInputElement) => {
    replace(errors, h("div", { class: "error", role: "alert" }, text));
    focus.focus();
  };
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    replace(done);
    if (!current.value) return fail("Enter your current password.", current);
    const n = [...next.value].length;
    if (n < 8 || n > 128) return fail("The new password must be 8 to 128 characters.", next);
    if (next.value !== again.value) return fail("The two new passwords differ.", again);
    if (next.value === current.value) return fail("The new password is the current one.", next);
    const ok = await busy(submit, errors, async () => {
      await identity.changePassword({ currentPassword: current.value, newPassword: next.value });
    });
    if (ok) {
      for (const el of [current, next, again]) el.value = "";
      replace(done, h("p", { class: "notice", role: "status", "data-testid": "password-changed" }, "Password changed. Your other sessions have ended."));
      announce("Password changed.");
    } else {
      current.select();
    }
  });
  return h("section", null, pageTitle("Account"), h("div", { class: "card" }, form, done), twoFactorCard());
}

export interface TwoFactorOptions {
  /** Called once the enrolment is confirmed (and the session replaced). */
  onConfirmed?: () => void;
}

/** Two-factor sign-in (IdentityService.StartTotpEnrolment,
 * ConfirmTotpEnrolment, DisableTotp): the QR code is the service's PNG.
 * Confirming ends the admin's other sessions; the answer's cookie is the
 * new one. While [admin].require_2fa is on it cannot be turned off. */
export function twoFactorCard(opts: TwoFactorOptions = {}): HTMLElement {
  const card = h("div", { class: "card", "aria-label": "Two-factor sign-in", role: "region" });
  const errors = alertSlot();
  let required = false;
  const render = async () => {
    replace(card, h("h2", null, "Two-factor sign-in"), h("p", { class: "hint" }, "Loading…"));
    try {
      const me = await identity.getMe({});
      required = me.totpRequired;
      replace(card, h("h2", null, "Two-factor sign-in"), me.totpEnabled ? disableForm() : startButton(), errors);
    } catch (err) {
      replace(card, h("h2", null, "Two-factor sign-in"), errors);
      replace(errors, h("div", { class: "error", role: "alert" }, String(err)));
    }
  };
  // Enrolling needs the password at both steps (a stolen session alone
  // cannot enrol a factor): asked once, kept only in this closure until
  // the confirmation.
  const startButton = () => {
    const password = h("input", { name: "password", type: "password", autocomplete: "current-password", required: true, maxlength: 128 });
    const btn = h("button", { type: "submit", class: "primary" }, "Set up two-factor sign-in");
    const out = h("div");
    const form = h("form", { class: "action-form", "aria-label": "Set up two-factor sign-in", novalidate: true }, field("Password", password), btn);
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      if (!password.value) {
        replace(errors, h("div", { class: "error", role: "alert" }, "Enter your password."));
        password.focus();
        return;
      }
      let url = "";
      let secret = "";
      let png = "";
      const pw = password.value;
      const ok = await busy(btn, errors, async () => {
        const res = await identity.startTotpEnrolment({ password: pw });
        url = res.otpauthUrl;
        secret = res.secret;
        png = res.qrPng;
      });
      if (ok) {
        password.value = "";
        replace(out, enrolment(url, secret, png, pw));
      }
    });
    return h("div", null, h("p", null, required ? "Not set up yet." : "Off. Signing in asks for your password only."), form, out);
  };
  const enrolment = (url: string, secret: string, png: string, password: string) => {
    const code = h("input", { name: "code", autocomplete: "one-time-code", inputmode: "numeric", maxlength: 8, size: 10, required: true });
    const submit = h("button", { type: "submit", class: "primary" }, "Confirm");
    const form = h(
      "form",
      { class: "action-form", "aria-label": "Confirm two-factor sign-in", novalidate: true },
      h("p", null, "Scan the QR code with your authenticator app, or type in the secret, then enter the app's current code."),
      h("img", { src: png, alt: "QR code of the two-factor secret", width: 200, height: 200, "data-testid": "totp-qr" }),
      h("p", null, "Secret: ", h("code", { "data-testid": "totp-secret" }, secret)),
      h("p", { class: "hint" }, h("code", { "data-testid": "totp-url" }, url)),
      field("Code", code),
      submit,
    );
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      let codes: string[] = [];
      const ok = await busy(submit, errors, async () => {
        const res = await identity.confirmTotpEnrolment({ code: code.value.trim(), password });
        codes = res.recoveryCodes;
      });
      if (!ok) return;
      replace(
        card,
        h("h2", null, "Two-factor sign-in"),
        h(
          "div",
          { class: "notice", role: "status", "data-testid": "totp-on" },
          h("p", null, h("strong", null, "Two-factor sign-in is on."), " Keep these recovery codes somewhere safe: each signs in once in place of a code, and they are not shown again."),
          h("ul", { "data-testid": "recovery-codes" }, codes.map((c) => h("li", null, h("code", null, c)))),
          h("p", { class: "hint" }, "Your other sessions have ended."),
        ),
        required ? null : disableForm(),
        errors,
      );
      announce("Two-factor sign-in is on.");
      opts.onConfirmed?.();
    });
    return form;
  };
  const disableForm = () => {
    const password = h("input", { name: "password", type: "password", autocomplete: "current-password", required: true, maxlength: 128 });
    const submit = h("button", { type: "submit", class: "danger" }, "Turn off");
    const form = h(
      "form",
      { class: "action-form", "aria-label": "Turn off two-factor sign-in", novalidate: true },
      h("p", null, "On. Signing in asks for a code of your authenticator app."),
      field("Password", password),
      submit,
    );
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const ok = await busy(submit, errors, async () => {
        await identity.disableTotp({ password: password.value });
      });
      if (ok) {
        announce("Two-factor sign-in is off.");
        void render();
      }
    });
    return form;
  };
  void render();
  return card;
}
