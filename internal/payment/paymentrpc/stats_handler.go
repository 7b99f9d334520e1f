package paymentrpc

import (
	"context"

	"connectrpc.com/connect"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/rpc"
)

// GetPaymentStats implements PaymentAdminService.GetPaymentStats.
func (h *AdminHandler) GetPaymentStats(ctx context.Context, req *connect.Request[paymentpb.GetPaymentStatsRequest]) (*connect.Response[paymentpb.GetPaymentStatsResponse], error) {
	since, err := rpc.OptionalTime("since", req.Msg.GetSince())
	if err != nil {
		return nil, err
	}
	st, err := h.svc.PaymentStats(ctx, since)
	if err != nil {
		return nil, err
	}
	out := &paymentpb.GetPaymentStatsResponse{
		Since: rpc.Time(st.Since), AsOf: rpc.Time(st.AsOf),
		Total: uint64(st.Total), Pending: uint64(st.Pending), Success: uint64(st.Success),
		Failed: uint64(st.Failed), Refunded: uint64(st.Refunded), PendingNow: uint64(st.PendingNow),
		Succeeded:      make([]*paymentpb.PaymentCurrencyTotal, 0, len(st.Succeeded)),
		RefundsPending: uint64(st.RefundsPending), OldestPendingRefundAt: rpc.TimePtr(st.OldestPendingRefund),
	}
	if st.HasRate {
		out.SuccessRate = &st.SuccessRate
	}
	for _, c := range st.Succeeded {
		out.Succeeded = append(out.Succeeded, &paymentpb.PaymentCurrencyTotal{
			Currency: c.Currency, Payments: uint64(c.Payments),
			Amount: money.FormatCents(c.AmountCents), RefundedAmount: money.FormatCents(c.RefundedCents),
		})
	}
	for _, r := range st.ToReturn {
		out.ToReturn = append(out.ToReturn, &paymentpb.MoneyToReturn{
			Currency: r.Currency, Payments: uint64(r.Payments), Amount: money.FormatCents(r.Cents), OldestCapturedAt: rpc.Time(r.Oldest),
		})
	}
	return connect.NewResponse(out), nil
}
