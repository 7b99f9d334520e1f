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
import { productsView } from "./views/products";
import { refundsView } from "./views/refunds";
import { invoiceDetailView } from "./views/invoices";
import { disputesView } from "./views/disputes";
import { renewalsView } from "./views/renewals";
import { auditView } from "./views/audit";

/** Every screen, once, in the navigation's order: a screen with a nav label
 * is a section of the navigation; the others (a record's page, the account)
 * are reached by links and count as the section of their first segment. */
export const routes: Route[] = [
  { pattern: "", nav: "Dashboard", render: dashboardView },
  { pattern: "payments", nav: "Payments", render: paymentsView },
  { pattern: "payments/:id", render: paymentDetailView },
  { pattern: "refunds", nav: "Refunds", render: refundsView },
  { pattern: "disputes", nav: "Disputes", render: disputesView },
  { pattern: "orders", nav: "Orders", render: ordersView },
  { pattern: "orders/:id", render: orderDetailView },
  { pattern: "invoices/:id", render: invoiceDetailView },
  { pattern: "renewals", nav: "Renewals", render: renewalsView },
  { pattern: "products", nav: "Products", render: productsView },
  { pattern: "customers", nav: "Customers", render: customersView },
  { pattern: "customers/:id", render: customerDetailView },
  { pattern: "gateways", nav: "Gateway interfaces", render: gatewaysView },
  { pattern: "gateways/:id", render: gatewayDetailView },
  { pattern: "plugins", nav: "Plugins", render: pluginsView },
  { pattern: "plugins/:name", render: pluginDetailView },
  { pattern: "events", nav: "Events", render: eventsView },
  { pattern: "events/:id", render: eventDetailView },
  { pattern: "audit", nav: "Audit log", render: auditView },
  { pattern: "notifications", nav: "Notifications", render: notificationsView },
  { pattern: "api-keys", nav: "API keys", render: apiKeysView },
  // Reached from the top bar, not the sections.
  { pattern: "account", render: accountView },
];
