package store

import "github.com/rustbill/paymentd/internal/store/dbsqlc"

// PlanChange is a plan_changes row: one change of an order's product
// (internal/order, ChangeOrderPlan).
type PlanChange = dbsqlc.PlanChange

// The parameters of the plan change queries run through Q.
type (
	InsertPlanChangeParams           = dbsqlc.InsertPlanChangeParams
	SetPlanChangeStatusParams        = dbsqlc.SetPlanChangeStatusParams
	SetPlanChangeRenewalParams       = dbsqlc.SetPlanChangeRenewalParams
	ListPlanChangesLapsingParams     = dbsqlc.ListPlanChangesLapsingParams
	ListPlanChangesDueParams         = dbsqlc.ListPlanChangesDueParams
	AppliedPlanChangesInPeriodParams = dbsqlc.AppliedPlanChangesInPeriodParams
	SetOrderPlanParams               = dbsqlc.SetOrderPlanParams
)

// The plan change statuses and timings (plan_changes.status, timing).
const (
	PlanChangePending   = "pending"
	PlanChangeApplied   = "applied"
	PlanChangeCancelled = "cancelled"
	PlanChangeLapsed    = "lapsed"

	PlanChangeNow       = "now"
	PlanChangePeriodEnd = "period_end"
)
