// The console's screens, relative to the base path.

import type { Route } from "./router";
import { accountView } from "./views/account";
import { apiKeysView } from "./views/api_keys";
import { customerDetailView, customersView } from "./views/customers";
import { dashboardView } from "./views/dashboard";
import { orderDetailView, ordersView } from "./views/orders";
import { paymentDetailView, paymentsView } from "./views/payments";
import { eventDetailView, eventsView, notificationsView } from "./views/events";
import { gatewayDetailView, gatewaysView } from "./views/gateways";
import { pluginDetailView, pluginsView } from "./views/plugins";
import { refundsView } from "./views/refunds";
import { auditView } from "./views/audit";

export interface Section {
  path: string;
  label: string;
}

export const sections: Section[] = [
  { path: "", label: "Dashboard" },
  { path: "payments", label: "Payments" },
  { path: "refunds", label: "Refunds" },
  { path: "orders", label: "Orders" },
  { path: "customers", label: "Customers" },
  { path: "gateways", label: "Gateway interfaces" },
  { path: "plugins", label: "Plugins" },
  { path: "events", label: "Events" },
  { path: "audit", label: "Audit log" },
  { path: "notifications", label: "Notifications" },
  { path: "api-keys", label: "API keys" },
];

export const routes: Route[] = [
  { pattern: "", section: "", render: dashboardView },
  { pattern: "payments", section: "payments", render: paymentsView },
  { pattern: "payments/:id", section: "payments", render: paymentDetailView },
  { pattern: "refunds", section: "refunds", render: refundsView },
  { pattern: "orders", section: "orders", render: ordersView },
  { pattern: "orders/:id", section: "orders", render: orderDetailView },
  { pattern: "customers", section: "customers", render: customersView },
  { pattern: "customers/:id", section: "customers", render: customerDetailView },
  { pattern: "gateways", section: "gateways", render: gatewaysView },
  { pattern: "gateways/:id", section: "gateways", render: gatewayDetailView },
  { pattern: "plugins", section: "plugins", render: pluginsView },
  { pattern: "plugins/:name", section: "plugins", render: pluginDetailView },
  { pattern: "events", section: "events", render: eventsView },
  { pattern: "events/:id", section: "events", render: eventDetailView },
  { pattern: "notifications", section: "notifications", render: notificationsView },
  { pattern: "audit", section: "audit", render: auditView },
  { pattern: "api-keys", section: "api-keys", render: apiKeysView },
  // Reached from the top bar, not the sections.
  { pattern: "account", section: "", render: accountView },
];
