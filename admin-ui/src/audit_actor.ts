// Who made an audit entry, in words: the admin's or API key's name rather
// than its id. The service fills actor_name by looking the actor up when it
// answers; an actor that is gone (a deleted key) keeps its short id. No DOM
// here, so the wording is unit-tested.

import { shortId } from "./format";

/** The fields of an AuditEntry (billing.payment.AuditEntry) the wording needs. */
export interface ActorLike {
  actorKind: string;
  actorId: string;
  actorName?: string;
}

/** The sign-in and sign-out actions, which the audit view can hide. */
export const sessionActions = ["admin.login", "admin.logout"] as const;

const kindWords: Record<string, string> = {
  admin: "admin",
  api_key: "API key",
  customer: "customer",
  gateway: "gateway",
  system: "system",
};

/** "admin alice", "API key ops-bot", "customer a@example.com", "gateway
 * Bank transfer", "system node-1"; the short id when the name is unknown;
 * the kind alone when there is no id. */
export function actorText(a: ActorLike): string {
  const kind = kindWords[a.actorKind] ?? a.actorKind;
  if (a.actorName) return `${kind} ${a.actorName}`;
  if (!a.actorId) return kind;
  // The system's id is a node id, short already and meaningful whole.
  return `${kind} ${a.actorKind === "system" ? a.actorId : shortId(a.actorId)}`;
}
