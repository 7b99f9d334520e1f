package harness

import (
	"net/url"
	"strconv"

	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/fakes/epay"
)

// CallbackPayload is the notification epay sends for the payment of seeded
// row n once the buyer has paid: signed with the merchant key, the money
// exactly as the payment was created.
func CallbackPayload(w *World, n int64) string {
	v := url.Values{}
	v.Set("pid", merchantPID)
	v.Set("trade_no", "2026"+strconv.FormatInt(n, 10))
	v.Set("out_trade_no", BenchID(kindPayment, n).String())
	v.Set("type", "alipay")
	v.Set("name", "VPS 1G")
	v.Set("money", price)
	v.Set("trade_status", "TRADE_SUCCESS")
	v.Set("sign", epay.Sign(v, merchantKey))
	v.Set("sign_type", "MD5")
	return v.Encode()
}

// CallbackCalls are HandleCallback calls (no credential: the signature is
// the protection), one per pending payment of r.
func CallbackCalls(w *World, r Range) []Call {
	h := GRPCHeader("")
	calls := make([]Call, r.N)
	for i := range calls {
		calls[i] = Call{Path: paymentpbconnect.PaymentServiceHandleCallbackProcedure, Header: h, Body: GRPCFrame(&paymentpb.PaymentCallbackRequest{
			GatewayInterfaceId: w.GatewayID.String(), Payload: CallbackPayload(w, r.At(i)),
		})}
	}
	return calls
}

// headers are the gRPC headers of each customer, shared by their calls.
func (w *World) headers() []Header {
	out := make([]Header, w.Customers)
	for i := range out {
		out[i] = GRPCHeader(w.Tokens[i])
	}
	return out
}

// GetCalls are GetPayment calls by each payment's own customer, one per
// payment of r, in a scattered order (a payment's neighbours belong to other
// customers anyway).
func GetCalls(w *World, r Range, n int) []Call {
	hs := w.headers()
	calls := make([]Call, n)
	for i := range calls {
		// A stride coprime with most range sizes walks the whole range.
		num := r.From + (int64(i)*7919)%r.N
		calls[i] = Call{Path: paymentpbconnect.PaymentServiceGetPaymentProcedure, Header: hs[w.customerOf(num)-1],
			Body: GRPCFrame(&paymentpb.GetPaymentRequest{Id: BenchID(kindPayment, num).String()})}
	}
	return calls
}

// ListCalls are ListPayments calls, first page of 20, customers in turn.
func ListCalls(w *World, n int) []Call {
	hs := w.headers()
	body := GRPCFrame(&paymentpb.ListPaymentsRequest{Pagination: &paymentpb.PageRequest{Page: 1, PageSize: 20}})
	calls := make([]Call, n)
	for i := range calls {
		calls[i] = Call{Path: paymentpbconnect.PaymentServiceListPaymentsProcedure, Header: hs[i%w.Customers], Body: body}
	}
	return calls
}

// CreateCalls are CreatePayment calls on the epay interface, one per
// pending order of r, by the order's customer.
func CreateCalls(w *World, r Range) []Call {
	hs := w.headers()
	calls := make([]Call, r.N)
	for i := range calls {
		num := r.At(i)
		calls[i] = Call{Path: paymentpbconnect.PaymentServiceCreatePaymentProcedure, Header: hs[w.customerOf(num)-1],
			Body: GRPCFrame(&paymentpb.CreatePaymentRequest{
				OrderId: BenchID(kindOrder, num).String(), GatewayInterfaceId: w.GatewayID.String(),
				ReturnUrl: "https://shop.example/done",
			})}
	}
	return calls
}

// BalanceCalls are PayWithBalance calls, one per pending order of r, by the
// order's customer.
func BalanceCalls(w *World, r Range) []Call {
	hs := w.headers()
	calls := make([]Call, r.N)
	for i := range calls {
		num := r.At(i)
		calls[i] = Call{Path: orderpbconnect.OrderServicePayWithBalanceProcedure, Header: hs[w.customerOf(num)-1],
			Body: GRPCFrame(&orderpb.PayWithBalanceRequest{OrderId: BenchID(kindOrder, num).String()})}
	}
	return calls
}
