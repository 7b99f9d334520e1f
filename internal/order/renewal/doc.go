// Package renewal is the billing run of recurring orders: on the `billing`
// leader it issues each service period's renewal invoice, pays it from the
// customer's balance when that covers it, and suspends and then ends the
// services whose invoices stay unpaid (docs/decisions.md, "renewals").
package renewal
