// "Download CSV" beside the payment and refund lists: the service's export
// route (GET /export/<kind>.csv, streamed, authenticated by the session
// cookie) for a date range and time zone, with the list's current filters.

import { h } from "./dom";
import { field } from "./ui";

/** A date as the <input type=date> value (local calendar). */
function day(d: Date): string {
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

/** Whether name is an IANA time zone the browser knows. */
function knownZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat("en", { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

/** The export's URL for the range, zone and filters (empty filters left out). */
export function exportURL(kind: "payments" | "refunds", from: string, to: string, tz: string, filters: Record<string, string | undefined>): string {
  const q = new URLSearchParams({ from, to, tz });
  for (const [k, v] of Object.entries(filters)) {
    if (v) q.set(k, v);
  }
  return `${window.location.origin}/export/${kind}.csv?${q.toString()}`;
}

/** The download form: from and to (this month by default), the admin's
 * time zone, and a link that downloads the file the filters select. */
export function exportForm(kind: "payments" | "refunds", filters: Record<string, string | undefined>, now: Date = new Date()): HTMLElement {
  const from = h("input", { type: "date", name: "from", value: day(new Date(now.getFullYear(), now.getMonth(), 1)), required: true });
  const to = h("input", { type: "date", name: "to", value: day(now), required: true });
  const tz = h("input", { name: "tz", value: Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC", spellcheck: "false", size: 18 });
  const download = h("a", { class: "button", "data-testid": `export-${kind}` }, "Download CSV");
  const problem = h("p", { class: "hint", role: "status" });
  const active = Object.entries(filters).filter(([, v]) => v).map(([k]) => k.replace(/_/g, " "));
  const update = () => {
    let why = "";
    if (!from.value || !to.value) why = "Choose both dates.";
    else if (to.value < from.value) why = "“To” comes before “From”.";
    else if (!knownZone(tz.value.trim())) why = `“${tz.value}” is no time zone name such as UTC or Europe/Berlin.`;
    problem.textContent = why || (active.length ? `Both days included, with the list's filters: ${active.join(", ")}.` : "Every record of the range, both days included.");
    if (why) {
      download.removeAttribute("href");
      download.removeAttribute("download");
      download.setAttribute("aria-disabled", "true");
      return;
    }
    download.href = exportURL(kind, from.value, to.value, tz.value.trim(), filters);
    download.setAttribute("download", `${kind}-${from.value}-${to.value}.csv`);
    download.removeAttribute("aria-disabled");
  };
  for (const input of [from, to, tz]) input.addEventListener("input", update);
  update();
  return h(
    "div",
    { class: "export", role: "group", "aria-label": `Download ${kind} as CSV` },
    field("From", from),
    field("To", to),
    field("Time zone", tz),
    h("div", { class: "export-action" }, download, problem),
  );
}
