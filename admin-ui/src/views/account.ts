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
  return h("section", null, pageTitle("Account"), h("div", { class: "card" }, form, done));
}
