package rpc

import (
	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/paging"
)

// PageMeta is the wire form of a page of a list (internal/paging), the
// billing.payment.PageMeta that every list but identity's answers with.
func PageMeta(p paging.Page) *paymentpb.PageMeta {
	return &paymentpb.PageMeta{Total: p.Total, Page: p.Number, PageSize: p.Size, TotalPages: p.TotalPages()}
}

// IdentityPageMeta is PageMeta for the identity services: the contract
// gives them a message of their own, billing.identity.PageMeta, with the
// same four fields.
func IdentityPageMeta(p paging.Page) *identitypb.PageMeta {
	return &identitypb.PageMeta{Total: p.Total, Page: p.Number, PageSize: p.Size, TotalPages: p.TotalPages()}
}
