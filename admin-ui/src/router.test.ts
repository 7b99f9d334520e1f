import { describe, expect, it } from "vitest";

import { match, sectionOf, type Route } from "./router";

const view = () => null as unknown as Node;
const routes: Route[] = [
  { pattern: "", nav: "Dashboard", render: view },
  { pattern: "payments", nav: "Payments", render: view },
  { pattern: "payments/:id", render: view },
  { pattern: "plugins/:name", render: view },
];

describe("match", () => {
  it("finds the dashboard at the base", () => {
    expect(match(routes, "")?.route.pattern).toBe("");
  });

  it("binds parameters", () => {
    const m = match(routes, "payments/7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f");
    expect(m?.route.pattern).toBe("payments/:id");
    expect(m?.params).toEqual({ id: "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f" });
  });

  it("needs every segment to match", () => {
    expect(match(routes, "payments/1/refunds")).toBeNull();
    expect(match(routes, "orders")).toBeNull();
    expect(match(routes, "payments/")).toBeNull();
  });
});

describe("sectionOf", () => {
  it("puts a record's page under its list", () => {
    expect(routes.map(sectionOf)).toEqual(["", "payments", "payments", "plugins"]);
  });
});
