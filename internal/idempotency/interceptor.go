package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/store"
)

// Header is the request metadata that carries a key (gRPC metadata
// idempotency-key; any case over HTTP).
const Header = "Idempotency-Key"

// ReplayedHeader is set to "true" on an answer that is a kept outcome, not
// a new run.
const ReplayedHeader = "Idempotent-Replayed"

// Defaults: how long a key is kept, how long a call with a key may run,
// how long a second call waits for the first, and how often it looks.
const (
	DefaultTTL        = 24 * time.Hour
	DefaultRunTimeout = 2 * time.Minute
	DefaultMaxWait    = 10 * time.Second
	pollEvery         = 100 * time.Millisecond
	maxKeyLength      = 255
	// recordTimeout bounds writing an outcome, which runs even when the
	// caller has gone.
	recordTimeout = 15 * time.Second
)

// Options configure an Interceptor; zero fields take the defaults.
type Options struct {
	// Procedures are the procedures that take keys (see For).
	Procedures []Procedure
	TTL        time.Duration
	RunTimeout time.Duration
	MaxWait    time.Duration
	Clock      func() time.Time
	Logger     *slog.Logger
}

// Interceptor keeps the outcome of the calls of its procedures that carry
// an Idempotency-Key. Mount it inside validation and authorization (it
// needs the principal, and a request they refuse must not take a key) and
// outside the error mapping (it keeps the codes clients see).
type Interceptor struct {
	db         store.DB
	procedures map[string]Procedure
	opts       Options
}

// Procedure is one procedure that takes keys, and how its kept response
// is read back.
type Procedure struct {
	Name   string
	decode func([]byte) (connect.AnyResponse, error)
}

// For is the procedure of that full name whose response message is Res.
func For[Res any, P interface {
	*Res
	proto.Message
}](name string) Procedure {
	return Procedure{Name: name, decode: func(b []byte) (connect.AnyResponse, error) {
		var m Res
		if err := proto.Unmarshal(b, P(&m)); err != nil {
			return nil, err
		}
		return connect.NewResponse(&m), nil
	}}
}

var _ connect.Interceptor = (*Interceptor)(nil)

// New returns the interceptor over db.
func New(db store.DB, opts Options) *Interceptor {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.RunTimeout <= 0 {
		opts.RunTimeout = DefaultRunTimeout
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = DefaultMaxWait
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	procs := make(map[string]Procedure, len(opts.Procedures))
	for _, p := range opts.Procedures {
		procs[p.Name] = p
	}
	return &Interceptor{db: db, procedures: procs, opts: opts}
}

// WrapUnary implements connect.Interceptor.
func (i *Interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		procedure := req.Spec().Procedure
		key := req.Header().Get(Header)
		proc, takes := i.procedures[procedure]
		if key == "" || !takes || req.Spec().IsClient {
			return next(ctx, req)
		}
		if err := checkKey(key); err != nil {
			return nil, err
		}
		p, ok := auth.FromContext(ctx)
		if !ok {
			// Every procedure that takes a key needs a caller; the
			// authorization inside answers this one.
			return next(ctx, req)
		}
		msg, ok := req.Any().(proto.Message)
		if !ok {
			return next(ctx, req)
		}
		hash, err := requestHash(procedure, msg)
		if err != nil {
			return nil, connect.NewError(connect.CodeInternal, errors.New("idempotency: cannot encode the request"))
		}
		c := call{i: i, principal: p.String(), key: key, procedure: proc, hash: hash}
		return c.do(ctx, func(ctx context.Context) (connect.AnyResponse, error) { return next(ctx, req) })
	}
}

// WrapStreamingClient implements connect.Interceptor: keys are for unary
// calls.
func (i *Interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler implements connect.Interceptor: keys are for unary
// calls.
func (i *Interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// checkKey refuses a key that is empty, too long or not printable ASCII.
func checkKey(key string) error {
	if len(key) > maxKeyLength {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is %d characters long; at most %d", Header, len(key), maxKeyLength))
	}
	for j := 0; j < len(key); j++ {
		if c := key[j]; c < 0x21 || c > 0x7e {
			return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s must be printable ASCII without spaces (a UUID, say)", Header))
		}
	}
	return nil
}

// requestHash is what tells one request from another under a key.
func requestHash(procedure string, msg proto.Message) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	h.Write([]byte(procedure))
	h.Write([]byte{0})
	h.Write(b)
	return h.Sum(nil), nil
}

// call is one call with a key.
type call struct {
	i         *Interceptor
	principal string
	key       string
	procedure Procedure
	hash      []byte
}

func (c call) do(ctx context.Context, run func(context.Context) (connect.AnyResponse, error)) (connect.AnyResponse, error) {
	deadline := time.Now().Add(c.i.opts.MaxWait)
	for {
		now := c.i.opts.Clock()
		claimed, err := store.ClaimIdempotencyKey(ctx, c.i.db, store.IdempotencyClaim{
			Principal: c.principal, Key: c.key, Procedure: c.procedure.Name, RequestHash: c.hash,
			CreatedAt: now, ExpiresAt: now.Add(c.i.opts.TTL),
		})
		if err != nil {
			return nil, err
		}
		if claimed {
			return c.run(ctx, run)
		}
		res, err, again := c.taken(ctx, deadline)
		if !again {
			return res, err
		}
	}
}

// run runs the call as the key's owner and keeps its outcome.
func (c call) run(ctx context.Context, run func(context.Context) (connect.AnyResponse, error)) (connect.AnyResponse, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.i.opts.RunTimeout)
	defer cancel()
	// A panic in the handler comes back as Internal (server.HandlerOptions
	// recovers it inside this interceptor) and is kept as any Internal
	// outcome: what the call did is unknown, so a retry under the key is
	// answered it rather than run again. A panic that got past the
	// recovery would leave the key running: once stale it answers
	// FailedPrecondition, for the same reason.
	res, runErr := run(rctx)

	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer wcancel()
	fin := store.IdempotencyOutcome{Principal: c.principal, Key: c.key, FinishedAt: c.i.opts.Clock()}
	switch {
	case runErr == nil:
		msg, ok := res.Any().(proto.Message)
		if !ok {
			return res, runErr
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
		if err != nil {
			c.i.opts.Logger.ErrorContext(ctx, "idempotency: response not kept", "procedure", c.procedure.Name, "err", err)
			return res, runErr
		}
		fin.Response = b
	case retryable(connect.CodeOf(runErr)):
		if err := store.ReleaseIdempotencyKey(wctx, c.i.db, c.principal, c.key); err != nil {
			c.i.opts.Logger.ErrorContext(ctx, "idempotency: key not given back; it answers FailedPrecondition once it is stale",
				"procedure", c.procedure.Name, "err", err)
		}
		return res, runErr
	default:
		code := connect.CodeOf(runErr).String()
		message := runErr.Error()
		var ce *connect.Error
		if errors.As(runErr, &ce) {
			message = ce.Message()
		}
		fin.ErrorCode, fin.ErrorMessage = &code, &message
	}
	if err := store.FinishIdempotencyKey(wctx, c.i.db, fin); err != nil {
		// The call's own answer still goes to the caller; a retry then
		// finds the key running and, once stale, FailedPrecondition.
		c.i.opts.Logger.ErrorContext(ctx, "idempotency: outcome not kept", "procedure", c.procedure.Name, "err", err)
	}
	return res, runErr
}

// retryable are the codes that promise nothing changed and ask the client
// to try again: their key is given back.
func retryable(code connect.Code) bool {
	switch code {
	case connect.CodeUnavailable, connect.CodeResourceExhausted, connect.CodeAborted:
		return true
	}
	return false
}

// taken answers a call whose key is taken: refused if the request
// differs, the kept outcome once there is one; again when the key has
// become free (given back, or expired) and the call should claim it.
func (c call) taken(ctx context.Context, deadline time.Time) (res connect.AnyResponse, err error, again bool) {
	for {
		k, err := store.Q(c.i.db).GetIdempotencyKey(ctx, store.GetIdempotencyKeyParams{Principal: c.principal, Key: c.key})
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, true // given back by a retryable outcome
		}
		if err != nil {
			return nil, err, false
		}
		now := c.i.opts.Clock()
		if !k.ExpiresAt.After(now) {
			if err := store.DeleteExpiredIdempotencyKey(ctx, c.i.db, c.principal, c.key, now); err != nil {
				return nil, err, false
			}
			return nil, nil, true
		}
		if k.Procedure != c.procedure.Name || !bytes.Equal(k.RequestHash, c.hash) {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(
				"this %s was first sent with another request (%s at %s); a key names one request: use a new key for a new request",
				Header, k.Procedure, k.CreatedAt.UTC().Format(time.RFC3339))), false
		}
		if k.State == store.IdempotencyDone {
			res, err := c.replay(k)
			return res, err, false
		}
		if now.Sub(k.CreatedAt) > c.i.opts.RunTimeout+recordTimeout {
			return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf(
				"the first call with this %s (at %s) never finished: the instance running it stopped, so its outcome is unknown; "+
					"check what it did (the payment's refunds, the audit log) before sending the request again under a new key",
				Header, k.CreatedAt.UTC().Format(time.RFC3339))), false
		}
		busy := connect.NewError(connect.CodeAborted, fmt.Errorf("the first call with this %s is still running; retry in a few seconds", Header))
		if !time.Now().Before(deadline) {
			return nil, busy, false
		}
		t := time.NewTimer(pollEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, busy, false
		case <-t.C:
		}
	}
}

// replay answers a kept outcome.
func (c call) replay(k store.IdempotencyKey) (connect.AnyResponse, error) {
	if k.ErrorCode != nil {
		var code connect.Code
		if err := code.UnmarshalText([]byte(*k.ErrorCode)); err != nil {
			code = connect.CodeUnknown
		}
		msg := ""
		if k.ErrorMessage != nil {
			msg = *k.ErrorMessage
		}
		cerr := connect.NewError(code, errors.New(msg))
		cerr.Meta().Set(ReplayedHeader, "true")
		return nil, cerr
	}
	res, err := c.procedure.decode(k.Response)
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("idempotency: the kept response of %s does not decode: %w", c.procedure.Name, err))
	}
	res.Header().Set(ReplayedHeader, "true")
	return res, nil
}
