import { describe, expect, it } from "vitest";

import { actorText } from "./audit_actor";

describe("who made an audit entry", () => {
  it("names the admin, the API key, the customer and the gateway, not their ids", () => {
    const id = "8c257945-1111-4222-8333-444455556666";
    expect(actorText({ actorKind: "admin", actorId: id, actorName: "alice" })).toBe("admin alice");
    expect(actorText({ actorKind: "api_key", actorId: id, actorName: "ops-bot" })).toBe("API key ops-bot");
    expect(actorText({ actorKind: "customer", actorId: id, actorName: "a@example.com" })).toBe("customer a@example.com");
    expect(actorText({ actorKind: "gateway", actorId: id, actorName: "Bank transfer" })).toBe("gateway Bank transfer");
  });

  it("falls back to the short id for an actor that is gone, and to the kind without an id", () => {
    expect(actorText({ actorKind: "api_key", actorId: "8c257945-1111-4222-8333-444455556666", actorName: "" })).toBe("API key 8c257945");
    expect(actorText({ actorKind: "system", actorId: "vm-71626739" })).toBe("system vm-71626739");
    expect(actorText({ actorKind: "system", actorId: "" })).toBe("system");
  });
});
