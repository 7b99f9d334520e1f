package store

import "github.com/rustbill/paymentd/internal/store/dbsqlc"

// Saved payment methods (sql/queries/saved_payment_methods.sql): their
// rows and the parameters of the queries run through Q.
type (
	SavedPaymentMethod                          = dbsqlc.SavedPaymentMethod
	SavedChargeAttempt                          = dbsqlc.SavedChargeAttempt
	GetGatewayCustomerParams                    = dbsqlc.GetGatewayCustomerParams
	RememberGatewayCustomerParams               = dbsqlc.RememberGatewayCustomerParams
	SaveSavedPaymentMethodParams                = dbsqlc.SaveSavedPaymentMethodParams
	MarkSavedPaymentMethodRemovedParams         = dbsqlc.MarkSavedPaymentMethodRemovedParams
	SetOrderAutoChargeParams                    = dbsqlc.SetOrderAutoChargeParams
	InsertSavedChargeAttemptParams              = dbsqlc.InsertSavedChargeAttemptParams
	AnswerSavedChargeAttemptParams              = dbsqlc.AnswerSavedChargeAttemptParams
	ListInvoicesToChargeParams                  = dbsqlc.ListInvoicesToChargeParams
	InvoiceToCharge                             = dbsqlc.ListInvoicesToChargeRow
	ListSavedMethodsExpiringBeforeRenewalParams = dbsqlc.ListSavedMethodsExpiringBeforeRenewalParams
	MarkSavedMethodExpiryNoticedParams          = dbsqlc.MarkSavedMethodExpiryNoticedParams
)
