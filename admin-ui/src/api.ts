// The one Connect transport of the console and the typed clients built on it.
// Every request goes through code generated from proto/ by the same buf
// template as the Go server; there is no hand-written request code.
//
// The admin session is an httpOnly cookie set by IdentityService.AdminLogin:
// script never sees it, so every fetch sends credentials "include" and the
// browser attaches it.

import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import type { DescService } from "@bufbuild/protobuf";

import { EventAdminService } from "./gen/billing/event/event_pb";
import { GatewayAdminService } from "./gen/billing/gateway/gateway_pb";
import { CustomerAdminService, IdentityService } from "./gen/billing/identity/identity_pb";
import { IntegrationService } from "./gen/billing/integration/integration_pb";
import { OrderService } from "./gen/billing/order/order_pb";
import { OrderAdminService } from "./gen/billing/order/order_admin_pb";
import { PaymentService } from "./gen/billing/payment/payment_pb";
import { PaymentAdminService } from "./gen/billing/payment/payment_admin_pb";

type SessionListener = () => void;
const sessionEnded = new Set<SessionListener>();

/** Calls fn whenever the service answers Unauthenticated (the session ended). */
export function onSessionEnded(fn: SessionListener): void {
  sessionEnded.add(fn);
}

const sessionWatch: Interceptor = (next) => async (req) => {
  try {
    return await next(req);
  } catch (err) {
    const ce = ConnectError.from(err);
    // AdminLogin answers Unauthenticated for a wrong password: that is the
    // login form's business, not an ended session.
    if (ce.code === Code.Unauthenticated && req.method.name !== "AdminLogin") {
      for (const fn of sessionEnded) fn();
    }
    throw err;
  }
};

export const transport = createConnectTransport({
  // The API is served at the root of the origin; the console under admin_path.
  baseUrl: window.location.origin,
  // connect-web v2 takes fetch options through its fetch override.
  fetch: (input, init) => globalThis.fetch(input, { ...init, credentials: "include" }),
  interceptors: [sessionWatch],
  defaultTimeoutMs: 30_000,
});

function client<T extends DescService>(service: T): Client<T> {
  return createClient(service, transport);
}

export const identity = client(IdentityService);
export const customers = client(CustomerAdminService);
export const orders = client(OrderService);
export const orderAdmin = client(OrderAdminService);
export const payments = client(PaymentService);
export const paymentAdmin = client(PaymentAdminService);
export const gateways = client(GatewayAdminService);
export const integration = client(IntegrationService);
export const events = client(EventAdminService);

const codeNames: Partial<Record<Code, string>> = {
  [Code.Canceled]: "Cancelled",
  [Code.Unknown]: "Unknown error",
  [Code.InvalidArgument]: "Invalid input",
  [Code.DeadlineExceeded]: "The service did not answer in time",
  [Code.NotFound]: "Not found",
  [Code.AlreadyExists]: "Already exists",
  [Code.PermissionDenied]: "Not allowed",
  [Code.ResourceExhausted]: "Too many requests",
  [Code.FailedPrecondition]: "Not possible now",
  [Code.Aborted]: "Conflict, try again",
  [Code.OutOfRange]: "Out of range",
  [Code.Unimplemented]: "Not available on this server",
  [Code.Internal]: "Internal error",
  [Code.Unavailable]: "Service unavailable",
  [Code.DataLoss]: "Data loss",
  [Code.Unauthenticated]: "Not logged in",
};

/** A one-line, human message for any error a call can throw: the Connect
 * code in words, then the service's own message. */
export function errorMessage(err: unknown): string {
  const ce = ConnectError.from(err);
  const what = codeNames[ce.code] ?? Code[ce.code] ?? "Error";
  const detail = ce.rawMessage.trim();
  if (!detail || detail.toLowerCase() === what.toLowerCase()) {
    return what;
  }
  return `${what}: ${detail}`;
}

/** True when the server has no such operation (yet): a 404 for the procedure
 * reaches the client as Unimplemented. */
export function isUnimplemented(err: unknown): boolean {
  return ConnectError.from(err).code === Code.Unimplemented;
}

export function isAbort(err: unknown): boolean {
  return ConnectError.from(err).code === Code.Canceled;
}
