package store

import "github.com/rustbill/paymentd/internal/store/dbsqlc"

// Dispute is a gateway's dispute (chargeback) of a payment.
type Dispute = dbsqlc.Dispute

// The parameters of the dispute queries.
type (
	GetDisputeByGatewayIDParams    = dbsqlc.GetDisputeByGatewayIDParams
	InsertDisputeParams            = dbsqlc.InsertDisputeParams
	UpdateDisputeParams            = dbsqlc.UpdateDisputeParams
	FindGatewayPaymentByTxIDParams = dbsqlc.FindGatewayPaymentByTxIDParams
	ListDisputesParams             = dbsqlc.ListDisputesParams
	ListDisputesRow                = dbsqlc.ListDisputesRow
	DisputeAuditExistsParams       = dbsqlc.DisputeAuditExistsParams
	OpenDisputesOfOrderParams      = dbsqlc.OpenDisputesOfOrderParams
)
