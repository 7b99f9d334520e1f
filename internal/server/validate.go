package server

import (
	"context"
	"errors"

	"buf.build/go/protovalidate"
	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
)

// NewValidateInterceptor checks every request message against its
// protovalidate rules before the handler runs, and refuses a NUL character
// in any of its strings (nul.go). A violation answers InvalidArgument with
// a message naming each offending field ("validation error: id: value must
// be a valid UUID") and the buf.validate.Violations as an error detail for
// programs.
func NewValidateInterceptor() (connect.Interceptor, error) {
	v, err := protovalidate.New()
	if err != nil {
		return nil, err
	}
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if msg, ok := req.Any().(proto.Message); ok {
				if verr := nulError(msg.ProtoReflect()); verr != nil {
					return nil, validationError(verr)
				}
				if err := v.Validate(msg); err != nil {
					return nil, validationError(err)
				}
			}
			return next(ctx, req)
		}
	}), nil
}

func validationError(err error) *connect.Error {
	var verr *protovalidate.ValidationError
	if !errors.As(err, &verr) {
		// A rule that cannot be compiled or evaluated is our bug, not the caller's.
		return connect.NewError(connect.CodeInternal, errors.New("request validation failed"))
	}
	cerr := connect.NewError(connect.CodeInvalidArgument, errors.New(verr.Error()))
	if detail, derr := connect.NewErrorDetail(verr.ToProto()); derr == nil {
		cerr.AddDetail(detail)
	}
	return cerr
}
