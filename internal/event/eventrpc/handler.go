package eventrpc

import (
	"context"

	"connectrpc.com/connect"

	eventpb "github.com/rustbill/paymentd/gen/billing/event"
	"github.com/rustbill/paymentd/gen/billing/event/eventpbconnect"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/event"
	"github.com/rustbill/paymentd/internal/rpc"
	"github.com/rustbill/paymentd/internal/store"
)

// Policy is who may call each EventAdminService procedure: admins only.
var Policy = auth.Policy{
	eventpbconnect.EventAdminServiceListEventsProcedure:        auth.AdminOnly,
	eventpbconnect.EventAdminServiceGetEventProcedure:          auth.AdminOnly,
	eventpbconnect.EventAdminServiceRetryEventProcedure:        auth.AdminOnly,
	eventpbconnect.EventAdminServiceListNodesProcedure:         auth.AdminOnly,
	eventpbconnect.EventAdminServiceListLeadersProcedure:       auth.AdminOnly,
	eventpbconnect.EventAdminServiceListNotificationsProcedure: auth.AdminOnly,
}

// AdminHandler serves billing.event.EventAdminService: decode, call Admin,
// encode.
type AdminHandler struct {
	eventpbconnect.UnimplementedEventAdminServiceHandler
	admin *event.Admin
}

var _ eventpbconnect.EventAdminServiceHandler = (*AdminHandler)(nil)

// NewAdminHandler returns the EventAdminService handler over admin.
func NewAdminHandler(admin *event.Admin) *AdminHandler {
	return &AdminHandler{admin: admin}
}

// ListEvents implements EventAdminService.ListEvents.
func (h *AdminHandler) ListEvents(ctx context.Context, req *connect.Request[eventpb.ListEventsRequest]) (*connect.Response[eventpb.ListEventsResponse], error) {
	m := req.Msg
	f := store.EventFilter{Status: m.Status, EventType: m.EventType}
	var err error
	if f.OrderID, err = rpc.OptionalID(m.OrderId, "order_id"); err != nil {
		return nil, err
	}
	rows, page, err := h.admin.ListEvents(ctx, f, m.GetPagination().GetPage(), m.GetPagination().GetPageSize())
	if err != nil {
		return nil, err
	}
	out := &eventpb.ListEventsResponse{Events: make([]*eventpb.Event, 0, len(rows)), Meta: rpc.PageMeta(page)}
	for _, e := range rows {
		out.Events = append(out.Events, h.eventRecord(e))
	}
	return connect.NewResponse(out), nil
}

// GetEvent implements EventAdminService.GetEvent.
func (h *AdminHandler) GetEvent(ctx context.Context, req *connect.Request[eventpb.GetEventRequest]) (*connect.Response[eventpb.GetEventResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetId(), "id")
	if err != nil {
		return nil, err
	}
	e, err := h.admin.GetEvent(ctx, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&eventpb.GetEventResponse{Event: h.eventRecord(e)}), nil
}

// RetryEvent implements EventAdminService.RetryEvent.
func (h *AdminHandler) RetryEvent(ctx context.Context, req *connect.Request[eventpb.RetryEventRequest]) (*connect.Response[eventpb.RetryEventResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetId(), "id")
	if err != nil {
		return nil, err
	}
	e, err := h.admin.RetryEvent(ctx, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&eventpb.RetryEventResponse{Event: h.eventRecord(e)}), nil
}

// ListNodes implements EventAdminService.ListNodes.
func (h *AdminHandler) ListNodes(ctx context.Context, _ *connect.Request[eventpb.ListNodesRequest]) (*connect.Response[eventpb.ListNodesResponse], error) {
	rows, err := h.admin.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	out := &eventpb.ListNodesResponse{Nodes: make([]*eventpb.Node, 0, len(rows))}
	for _, n := range rows {
		out.Nodes = append(out.Nodes, &eventpb.Node{
			Id: n.ID, Hostname: n.Hostname, Version: n.Version,
			StartedAt: rpc.TimePtr(&n.StartedAt), HeartbeatAt: rpc.TimePtr(&n.HeartbeatAt),
			HeartbeatAgeSeconds: n.HeartbeatAge.Seconds(), Lost: n.Lost,
		})
	}
	return connect.NewResponse(out), nil
}

// ListLeaders implements EventAdminService.ListLeaders.
func (h *AdminHandler) ListLeaders(ctx context.Context, _ *connect.Request[eventpb.ListLeadersRequest]) (*connect.Response[eventpb.ListLeadersResponse], error) {
	rows, err := h.admin.ListLeaders(ctx)
	if err != nil {
		return nil, err
	}
	out := &eventpb.ListLeadersResponse{Leaders: make([]*eventpb.Leader, 0, len(rows))}
	for _, l := range rows {
		out.Leaders = append(out.Leaders, &eventpb.Leader{
			Role: l.Role, Holder: l.Holder, ElectedAt: rpc.TimePtr(&l.ElectedAt),
			ExpiresAt: rpc.TimePtr(&l.ExpiresAt), Valid: l.Valid,
		})
	}
	return connect.NewResponse(out), nil
}

// ListNotifications implements EventAdminService.ListNotifications.
func (h *AdminHandler) ListNotifications(ctx context.Context, req *connect.Request[eventpb.ListNotificationsRequest]) (*connect.Response[eventpb.ListNotificationsResponse], error) {
	m := req.Msg
	f := store.NotificationFilter{Status: m.Status, Channel: m.Channel}
	var err error
	if f.EventID, err = rpc.OptionalID(m.EventId, "event_id"); err != nil {
		return nil, err
	}
	rows, page, err := h.admin.ListNotifications(ctx, f, m.GetPagination().GetPage(), m.GetPagination().GetPageSize())
	if err != nil {
		return nil, err
	}
	out := &eventpb.ListNotificationsResponse{Notifications: make([]*eventpb.Notification, 0, len(rows)), Meta: rpc.PageMeta(page)}
	for _, n := range rows {
		rec := &eventpb.Notification{
			Id: n.ID.String(), Recipient: n.Recipient, Channel: n.Channel, Subject: n.Subject, Body: n.Body,
			Status: n.Status, Attempts: n.Attempts, LastError: n.LastError,
			SentAt: rpc.TimePtr(n.SentAt), CreatedAt: rpc.TimePtr(&n.CreatedAt),
		}
		if n.EventID != nil {
			rec.EventId = n.EventID.String()
		}
		if n.Status == store.NotificationPending {
			rec.NextAttemptAt = rpc.TimePtr(&n.NextAttemptAt)
		}
		out.Notifications = append(out.Notifications, rec)
	}
	return connect.NewResponse(out), nil
}

func (h *AdminHandler) eventRecord(e store.Event) *eventpb.Event {
	rec := &eventpb.Event{
		Id: e.ID.String(), EventType: e.EventType, OrderId: e.OrderID.String(), Status: e.Status,
		Payload: string(e.Payload), Attempts: e.Attempts, MaxAttempts: int32(h.admin.MaxAttempts()),
		RunAt: rpc.TimePtr(&e.RunAt), LastError: e.LastError,
		LockedUntil: rpc.TimePtr(e.LockedUntil),
		CreatedAt:   rpc.TimePtr(&e.CreatedAt), UpdatedAt: rpc.TimePtr(&e.UpdatedAt),
	}
	if e.LockedBy != nil {
		rec.LockedBy = *e.LockedBy
	}
	return rec
}
