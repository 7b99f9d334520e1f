package identityrpc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/identity"
	"github.com/rustbill/paymentd/internal/rpc"
)

// Handler serves billing.identity.IdentityService: decode, call the
// Service, encode. Tokens and keys leave only in responses, never in logs.
type Handler struct {
	svc *identity.Service
}

var _ identitypbconnect.IdentityServiceHandler = (*Handler)(nil)

// NewHandler returns the IdentityService handler.
func NewHandler(svc *identity.Service) *Handler {
	return &Handler{svc: svc}
}

// Register creates a customer and returns an access token.
func (h *Handler) Register(ctx context.Context, req *connect.Request[identitypb.RegisterRequest]) (*connect.Response[identitypb.RegisterResponse], error) {
	c, tok, err := h.svc.Register(ctx, req.Msg.GetEmail(), req.Msg.GetPassword(), req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	return noStore(connect.NewResponse(&identitypb.RegisterResponse{
		Customer:    customerToProto(c),
		AccessToken: tok.Token,
		ExpiresAt:   timestamp(tok.ExpiresAt),
	})), nil
}

// Login returns an access token for a customer's e-mail and password.
func (h *Handler) Login(ctx context.Context, req *connect.Request[identitypb.LoginRequest]) (*connect.Response[identitypb.LoginResponse], error) {
	c, tok, err := h.svc.Login(ctx, req.Msg.GetEmail(), req.Msg.GetPassword())
	if err != nil {
		return nil, err
	}
	return noStore(connect.NewResponse(&identitypb.LoginResponse{
		AccessToken: tok.Token,
		ExpiresAt:   timestamp(tok.ExpiresAt),
		Customer:    customerToProto(c),
	})), nil
}

// AdminLogin starts an admin session and sets its cookie.
func (h *Handler) AdminLogin(ctx context.Context, req *connect.Request[identitypb.AdminLoginRequest]) (*connect.Response[identitypb.AdminLoginResponse], error) {
	previous, _ := h.svc.SessionToken(req.Header())
	s, err := h.svc.AdminLogin(ctx, identity.AdminLoginInput{
		Username:      req.Msg.GetUsername(),
		Password:      req.Msg.GetPassword(),
		UserAgent:     req.Header().Get("User-Agent"),
		RemoteAddr:    req.Peer().Addr,
		PreviousToken: previous,
		TOTPCode:      req.Msg.GetTotpCode(),
	})
	var te *identity.TOTPError
	if errors.As(err, &te) {
		cerr := connect.NewError(connect.CodeUnauthenticated, te)
		if d, derr := connect.NewErrorDetail(&errdetails.ErrorInfo{Reason: te.Reason, Domain: "paymentd"}); derr == nil {
			cerr.AddDetail(d)
		}
		return nil, cerr
	}
	var le *identity.TOTPLockedError
	if errors.As(err, &le) {
		return nil, lockedError(le)
	}
	if err != nil {
		return nil, err
	}
	res := noStore(connect.NewResponse(&identitypb.AdminLoginResponse{
		Admin:     adminToProto(s.Admin),
		ExpiresAt: timestamp(s.ExpiresAt),
	}))
	res.Header().Add("Set-Cookie", h.svc.SessionCookie(s.Token).String())
	return res, nil
}

// Logout ends the caller's admin session and clears its cookie.
func (h *Handler) Logout(ctx context.Context, req *connect.Request[identitypb.LogoutRequest]) (*connect.Response[identitypb.LogoutResponse], error) {
	token, _ := h.svc.SessionToken(req.Header())
	if err := h.svc.Logout(ctx, token); err != nil {
		return nil, err
	}
	res := connect.NewResponse(&identitypb.LogoutResponse{})
	res.Header().Add("Set-Cookie", h.svc.ClearSessionCookie().String())
	return res, nil
}

// GetMe describes the caller.
func (h *Handler) GetMe(ctx context.Context, _ *connect.Request[identitypb.GetMeRequest]) (*connect.Response[identitypb.GetMeResponse], error) {
	me, err := h.svc.Me(ctx)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&identitypb.GetMeResponse{
		Role:             string(me.Role),
		Id:               me.ID.String(),
		Username:         me.Username,
		Email:            me.Email,
		CanCreateApiKeys: me.CanCreateAPIKeys,
		Credential:       string(me.Credential),
		Scope:            scopeName(me.Scope),
		Currencies:       h.svc.Currencies(),
		TotpEnabled:      me.TOTPEnabled,
		TotpRequired:     me.TOTPRequired,
	}), nil
}

// scopeName is an admin API key's scope on the wire; empty for none.
func scopeName(s auth.Scope) string {
	if s == 0 {
		return ""
	}
	return s.String()
}

// CreateApiKey creates an API key and returns it in full, once.
func (h *Handler) CreateApiKey(ctx context.Context, req *connect.Request[identitypb.CreateApiKeyRequest]) (*connect.Response[identitypb.CreateApiKeyResponse], error) {
	k, key, err := h.svc.CreateAPIKey(ctx, req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	return noStore(connect.NewResponse(&identitypb.CreateApiKeyResponse{Key: key, ApiKey: apiKeyToProto(k)})), nil
}

// ListApiKeys pages through the caller's API keys.
func (h *Handler) ListApiKeys(ctx context.Context, req *connect.Request[identitypb.ListApiKeysRequest]) (*connect.Response[identitypb.ListApiKeysResponse], error) {
	keys, page, err := h.svc.ListAPIKeys(ctx, req.Msg.GetPagination().GetPage(), req.Msg.GetPagination().GetPageSize())
	if err != nil {
		return nil, err
	}
	out := make([]*identitypb.ApiKey, len(keys))
	for i, k := range keys {
		out[i] = apiKeyToProto(k)
	}
	return connect.NewResponse(&identitypb.ListApiKeysResponse{ApiKeys: out, Meta: rpc.IdentityPageMeta(page)}), nil
}

// RevokeApiKey revokes one of the caller's API keys.
func (h *Handler) RevokeApiKey(ctx context.Context, req *connect.Request[identitypb.RevokeApiKeyRequest]) (*connect.Response[identitypb.RevokeApiKeyResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetId(), "id")
	if err != nil {
		return nil, err
	}
	k, err := h.svc.RevokeAPIKey(ctx, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&identitypb.RevokeApiKeyResponse{ApiKey: apiKeyToProto(k)}), nil
}

// ChangePassword sets the caller's password; a customer gets a new access
// token in the answer, an admin a new session cookie.
func (h *Handler) ChangePassword(ctx context.Context, req *connect.Request[identitypb.ChangePasswordRequest]) (*connect.Response[identitypb.ChangePasswordResponse], error) {
	ch, err := h.svc.ChangePassword(ctx, identity.ChangePasswordInput{
		Current:     req.Msg.GetCurrentPassword(),
		New:         req.Msg.GetNewPassword(),
		UserAgent:   req.Header().Get("User-Agent"),
		RemoteAddr:  req.Peer().Addr,
		KeepAPIKeys: req.Msg.GetKeepApiKeys(),
	})
	if err != nil {
		return nil, err
	}
	if ch.Session.Token != "" {
		res := noStore(connect.NewResponse(&identitypb.ChangePasswordResponse{
			ExpiresAt:      timestamp(ch.Session.ExpiresAt),
			ApiKeysRevoked: uint32(min(ch.APIKeysRevoked, 1<<31)),
		}))
		res.Header().Add("Set-Cookie", h.svc.SessionCookie(ch.Session.Token).String())
		return res, nil
	}
	return noStore(connect.NewResponse(&identitypb.ChangePasswordResponse{
		AccessToken: ch.Token.Token,
		ExpiresAt:   timestamp(ch.Token.ExpiresAt),
	})), nil
}

// CreateAdminApiKey creates an admin API key and returns it in full, once.
func (h *Handler) CreateAdminApiKey(ctx context.Context, req *connect.Request[identitypb.CreateAdminApiKeyRequest]) (*connect.Response[identitypb.CreateAdminApiKeyResponse], error) {
	expiresAt, err := rpc.OptionalTime("expires_at", req.Msg.GetExpiresAt())
	if err != nil {
		return nil, err
	}
	k, key, err := h.svc.CreateAdminAPIKey(ctx, req.Msg.GetName(), req.Msg.GetScope(), expiresAt)
	if err != nil {
		return nil, err
	}
	return noStore(connect.NewResponse(&identitypb.CreateAdminApiKeyResponse{Key: key, ApiKey: adminAPIKeyToProto(k)})), nil
}

// ListAdminApiKeys pages through every admin's API keys.
func (h *Handler) ListAdminApiKeys(ctx context.Context, req *connect.Request[identitypb.ListAdminApiKeysRequest]) (*connect.Response[identitypb.ListAdminApiKeysResponse], error) {
	keys, page, err := h.svc.ListAdminAPIKeys(ctx, req.Msg.GetPagination().GetPage(), req.Msg.GetPagination().GetPageSize())
	if err != nil {
		return nil, err
	}
	out := make([]*identitypb.AdminApiKey, len(keys))
	for i, k := range keys {
		out[i] = adminAPIKeyToProto(k)
	}
	return connect.NewResponse(&identitypb.ListAdminApiKeysResponse{ApiKeys: out, Meta: rpc.IdentityPageMeta(page)}), nil
}

// RevokeAdminApiKey revokes an admin API key.
func (h *Handler) RevokeAdminApiKey(ctx context.Context, req *connect.Request[identitypb.RevokeAdminApiKeyRequest]) (*connect.Response[identitypb.RevokeAdminApiKeyResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetId(), "id")
	if err != nil {
		return nil, err
	}
	k, err := h.svc.RevokeAdminAPIKey(ctx, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&identitypb.RevokeAdminApiKeyResponse{ApiKey: adminAPIKeyToProto(k)}), nil
}

func adminAPIKeyToProto(k identity.AdminAPIKey) *identitypb.AdminApiKey {
	out := &identitypb.AdminApiKey{
		Id:            k.ID.String(),
		Name:          k.Name,
		Prefix:        k.Prefix(),
		Scope:         k.Scope,
		AdminId:       k.AdminID.String(),
		AdminUsername: k.AdminUsername,
		CreatedAt:     timestamp(k.CreatedAt),
		LastUsedAt:    optionalTimestamp(k.LastUsedAt),
		RevokedAt:     optionalTimestamp(k.RevokedAt),
		ExpiresAt:     optionalTimestamp(k.ExpiresAt),
	}
	if k.RevokedBy != nil {
		out.RevokedBy = k.RevokedBy.String()
	}
	return out
}

// noStore keeps responses that carry a credential out of HTTP caches.
func noStore[T any](res *connect.Response[T]) *connect.Response[T] {
	res.Header().Set("Cache-Control", "no-store")
	return res
}

func timestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func optionalTimestamp(t *time.Time) string {
	if t == nil {
		return ""
	}
	return timestamp(*t)
}

func customerToProto(c identity.Customer) *identitypb.Customer {
	return &identitypb.Customer{
		Id:               c.ID.String(),
		Email:            c.Email,
		Name:             c.Name,
		Currency:         c.Currency,
		Balance:          c.Balance.String(),
		CreditLimit:      c.CreditLimit.String(),
		CanCreateApiKeys: c.CanCreateAPIKeys,
		DisabledAt:       optionalTimestamp(c.DisabledAt),
		CreatedAt:        timestamp(c.CreatedAt),
		UpdatedAt:        timestamp(c.UpdatedAt),
	}
}

func adminToProto(a identity.Admin) *identitypb.Admin {
	return &identitypb.Admin{
		Id:          a.ID.String(),
		Username:    a.Username,
		DisplayName: a.DisplayName,
		LastLoginAt: optionalTimestamp(a.LastLoginAt),
		CreatedAt:   timestamp(a.CreatedAt),
	}
}

func apiKeyToProto(k identity.APIKey) *identitypb.ApiKey {
	return &identitypb.ApiKey{
		Id:         k.ID.String(),
		Name:       k.Name,
		Prefix:     k.Prefix(),
		CreatedAt:  timestamp(k.CreatedAt),
		LastUsedAt: optionalTimestamp(k.LastUsedAt),
		RevokedAt:  optionalTimestamp(k.RevokedAt),
	}
}

func balanceTransactionToProto(t identity.BalanceTransaction) *identitypb.BalanceTransaction {
	out := &identitypb.BalanceTransaction{
		Id:            t.ID.String(),
		CustomerId:    t.CustomerID.String(),
		Type:          t.Type,
		Amount:        t.Amount.String(),
		BalanceBefore: t.BalanceBefore.String(),
		BalanceAfter:  t.BalanceAfter.String(),
		Description:   t.Description,
		CreatedAt:     timestamp(t.CreatedAt),
	}
	if t.CreatedBy != nil {
		out.CreatedBy = t.CreatedBy.String()
	}
	return out
}

// StartTotpEnrolment begins the caller's two-factor enrolment.
func (h *Handler) StartTotpEnrolment(ctx context.Context, req *connect.Request[identitypb.StartTotpEnrolmentRequest]) (*connect.Response[identitypb.StartTotpEnrolmentResponse], error) {
	e, err := h.svc.StartTOTPEnrolment(ctx, req.Msg.GetPassword())
	if err != nil {
		return nil, err
	}
	return noStore(connect.NewResponse(&identitypb.StartTotpEnrolmentResponse{OtpauthUrl: e.URL, Secret: e.Secret, QrPng: e.QRPNG})), nil
}

// ConfirmTotpEnrolment confirms it and answers the recovery codes, once.
func (h *Handler) ConfirmTotpEnrolment(ctx context.Context, req *connect.Request[identitypb.ConfirmTotpEnrolmentRequest]) (*connect.Response[identitypb.ConfirmTotpEnrolmentResponse], error) {
	c, err := h.svc.ConfirmTOTPEnrolment(ctx, req.Msg.GetPassword(), req.Msg.GetCode(), req.Header().Get("User-Agent"), req.Peer().Addr)
	if err != nil {
		return nil, err
	}
	res := noStore(connect.NewResponse(&identitypb.ConfirmTotpEnrolmentResponse{RecoveryCodes: c.RecoveryCodes}))
	res.Header().Add("Set-Cookie", h.svc.SessionCookie(c.Session.Token).String())
	return res, nil
}

// DisableTotp removes the caller's two-factor sign-in.
func (h *Handler) DisableTotp(ctx context.Context, req *connect.Request[identitypb.DisableTotpRequest]) (*connect.Response[identitypb.DisableTotpResponse], error) {
	if err := h.svc.DisableTOTP(ctx, req.Msg.GetPassword()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&identitypb.DisableTotpResponse{}), nil
}

// lockedError is the answer to a second-factor code refused unjudged:
// ResourceExhausted with the reason totp_locked, a RetryInfo detail and
// Retry-After (whole seconds, rounded up), as the rate limits answer.
func lockedError(le *identity.TOTPLockedError) *connect.Error {
	secs := int64((le.RetryAfter + time.Second - 1) / time.Second)
	cerr := connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%s, retry after %ds", le.Error(), secs))
	if d, err := connect.NewErrorDetail(&errdetails.ErrorInfo{Reason: identity.ReasonTOTPLocked, Domain: "paymentd"}); err == nil {
		cerr.AddDetail(d)
	}
	if d, err := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(le.RetryAfter)}); err == nil {
		cerr.AddDetail(d)
	}
	cerr.Meta().Set("Retry-After", strconv.FormatInt(secs, 10))
	return cerr
}
