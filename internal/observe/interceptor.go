package observe

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"
	"unicode"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/logging"
	"github.com/rustbill/paymentd/internal/text"
)

// Interceptor returns the RPC side of the Observer; put it first in every
// service's handler options.
func (o *Observer) Interceptor() connect.Interceptor { return &interceptor{o} }

type interceptor struct{ o *Observer }

func (i *interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		done := i.begin(ctx, req.Spec(), req.HTTPMethod(), req.Peer().Protocol)
		idsOf(ctx, req.Spec().Procedure, req.Any())
		resp, err := next(ctx, req)
		if err == nil && resp != nil {
			idsOf(ctx, "", resp.Any())
		}
		done(err)
		return resp, err
	}
}

func (i *interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i *interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		done := i.begin(ctx, conn.Spec(), "POST", conn.Peer().Protocol)
		err := next(ctx, conn)
		done(err)
		return err
	}
}

// PrincipalAttrs are the log attributes that name who called: the
// principal (admin:<id>, customer:<id>), the kind of credential and, for
// an API key, the key's id (never the key). The RPC access line and the
// CSV exports' lines (internal/export) name their caller with them.
func PrincipalAttrs(p auth.Principal) []slog.Attr {
	attrs := []slog.Attr{slog.String("principal", p.String()), slog.String("credential", string(p.Kind))}
	if p.Kind == auth.KindAPIKey && p.CredentialID != "" {
		attrs = append(attrs, slog.String("api_key_id", p.CredentialID))
	}
	return attrs
}

// begin notes the procedure and the principal for the request's log lines
// and names its span; the function it returns counts and logs the answer.
func (i *interceptor) begin(ctx context.Context, spec connect.Spec, method, protocol string) func(error) {
	start := time.Now()
	proc := spec.Procedure
	attrs := []slog.Attr{slog.String("procedure", proc)}
	if p, ok := auth.FromContext(ctx); ok {
		attrs = append(attrs, PrincipalAttrs(p)...)
	}
	logging.Add(ctx, attrs...)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetName(method + " " + strings.TrimPrefix(proc, "/"))
	}
	return func(err error) {
		took := time.Since(start)
		code := "ok"
		if err != nil {
			code = connect.CodeOf(err).String()
		}
		i.o.metrics.RPC(proc, code, took)
		level := slog.LevelInfo
		switch connect.CodeOf(err) {
		case connect.CodeInternal, connect.CodeUnknown, connect.CodeDataLoss, connect.CodeUnavailable, connect.CodeDeadlineExceeded:
			if err != nil {
				level = slog.LevelWarn
			}
		}
		line := []slog.Attr{slog.String("code", code), slog.Float64("duration_ms", ms(took)), slog.String("protocol", protocol)}
		if err != nil {
			// The message the client got: domain messages are written for
			// callers and carry no secret; internal causes are logged by
			// rpc.Error and reach neither the client nor this line.
			var ce *connect.Error
			if errors.As(err, &ce) {
				line = append(line, slog.String("error", text.Clip(ce.Message(), 300)))
			}
		}
		i.o.log.LogAttrs(ctx, level, "rpc", line...)
		if s := logging.ScopeFrom(ctx); s != nil {
			s.MarkLogged()
		}
	}
}

// idFields are the message fields worth a log attribute, under their own
// name: the ids a support request starts from.
var idFields = map[protoreflect.Name]bool{
	"payment_id": true, "order_id": true, "invoice_id": true, "customer_id": true,
	"gateway_interface_id": true, "event_id": true, "refund_id": true,
}

// resourceFields are message fields holding a record whose id and
// order_id are logged as <field>_id and order_id (a response's payment).
var resourceFields = map[protoreflect.Name]bool{"payment": true, "order": true, "invoice": true}

// idsOf adds the ids a message names to the request's Scope: fields named
// in idFields, the id of a payment/order/invoice it carries, and a
// request's "id", named after the procedure (GetPayment → payment_id,
// EnableGatewayInterface → gateway_interface_id). Only UUIDs are taken:
// the interceptor runs before validation.
func idsOf(ctx context.Context, procedure string, msg any) {
	m, ok := msg.(proto.Message)
	if !ok || logging.ScopeFrom(ctx) == nil {
		return
	}
	r := m.ProtoReflect()
	add := func(key string, v protoreflect.Value) {
		s := v.String()
		if _, err := uuid.Parse(s); err == nil && len(s) == 36 {
			logging.Add(ctx, slog.String(key, s))
		}
	}
	r.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.IsList() || fd.IsMap() {
			return true
		}
		name := fd.Name()
		switch {
		case fd.Kind() == protoreflect.StringKind && idFields[name]:
			add(string(name), v)
		case fd.Kind() == protoreflect.StringKind && name == "id" && procedure != "":
			if key := idKey(procedure); key != "" {
				add(key, v)
			}
		case fd.Kind() == protoreflect.MessageKind && resourceFields[name]:
			sub := v.Message()
			if f := sub.Descriptor().Fields().ByName("id"); f != nil && f.Kind() == protoreflect.StringKind {
				add(string(name)+"_id", sub.Get(f))
			}
			if f := sub.Descriptor().Fields().ByName("order_id"); f != nil && f.Kind() == protoreflect.StringKind && name != "order" {
				add("order_id", sub.Get(f))
			}
		}
		return true
	})
}

// idKey names the "id" of a procedure's request after the resource in the
// method's name: /billing.payment.PaymentService/GetPayment → payment_id.
func idKey(procedure string) string {
	method := procedure[strings.LastIndexByte(procedure, '/')+1:]
	// Drop the verb: the first capitalised word.
	i := 1
	for i < len(method) && !unicode.IsUpper(rune(method[i])) {
		i++
	}
	noun := method[i:]
	if noun == "" {
		return ""
	}
	var b strings.Builder
	for j, c := range noun {
		if unicode.IsUpper(c) {
			if j > 0 {
				b.WriteByte('_')
			}
			c = unicode.ToLower(c)
		}
		b.WriteRune(c)
	}
	return b.String() + "_id"
}
