package paymentrpc

import (
	"context"

	"connectrpc.com/connect"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/rpc"
)

const dateLayout = "2006-01-02"

// GetPaymentTrends implements PaymentAdminService.GetPaymentTrends.
func (h *AdminHandler) GetPaymentTrends(ctx context.Context, req *connect.Request[paymentpb.GetPaymentTrendsRequest]) (*connect.Response[paymentpb.GetPaymentTrendsResponse], error) {
	m := req.Msg
	tr, err := h.svc.PaymentTrends(ctx, payment.TrendQuery{From: m.GetFrom(), To: m.GetTo(), Zone: m.GetTimeZone()})
	if err != nil {
		return nil, err
	}
	out := &paymentpb.GetPaymentTrendsResponse{
		From: tr.From.Format(dateLayout), To: tr.To.Format(dateLayout), TimeZone: tr.Zone, AsOf: rpc.Time(tr.AsOf),
		Days:       make([]string, len(tr.Days)),
		Currencies: make([]*paymentpb.CurrencyTrend, 0, len(tr.Currencies)),
		Gateways:   make([]*paymentpb.GatewayTrend, 0, len(tr.Gateways)),
	}
	for i, d := range tr.Days {
		out.Days[i] = d.Format(dateLayout)
	}
	for _, c := range tr.Currencies {
		ct := &paymentpb.CurrencyTrend{Currency: c.Currency, Days: make([]*paymentpb.CurrencyDay, len(c.Days))}
		for i, d := range c.Days {
			ct.Days[i] = &paymentpb.CurrencyDay{
				Day: d.Day.Format(dateLayout), Created: uint64(d.Created), Succeeded: uint64(d.Succeeded), Failed: uint64(d.Failed),
				Received: money.FormatCents(d.ReceivedCents), Refunded: money.FormatCents(d.RefundedCents),
			}
		}
		out.Currencies = append(out.Currencies, ct)
	}
	for _, g := range tr.Gateways {
		gt := &paymentpb.GatewayTrend{
			GatewayInterfaceId: g.ID.String(), Name: g.Name,
			Created: uint64(g.Created), Succeeded: uint64(g.Succeeded), Failed: uint64(g.Failed),
			SuccessRate: ratePtr(g.SuccessRate), Days: make([]*paymentpb.GatewayDay, len(g.Days)),
		}
		if g.HasMedian {
			gt.MedianSecondsToSuccess = &g.MedianSecondsToSuccess
		}
		for i, d := range g.Days {
			gt.Days[i] = &paymentpb.GatewayDay{
				Day: d.Day.Format(dateLayout), Created: uint64(d.Created), Succeeded: uint64(d.Succeeded), Failed: uint64(d.Failed),
				SuccessRate: ratePtr(d.SuccessRate),
			}
		}
		out.Gateways = append(out.Gateways, gt)
	}
	return connect.NewResponse(out), nil
}

// ratePtr is a known rate, nil for an unknown one (absent on the wire).
func ratePtr(r payment.Rate) *float64 {
	if !r.Known {
		return nil
	}
	return &r.Value
}
