package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/rustbill/paymentd/internal/cluster"
	"github.com/rustbill/paymentd/internal/event"
	"github.com/rustbill/paymentd/internal/logging"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/startstop"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/text"
)

// Channel delivers one notification. An error fails the attempt; it is
// retried after a backoff unless it is Permanent.
type Channel interface {
	Name() string
	Send(ctx context.Context, n store.Notification) error
}

// Permanent marks a delivery error that no retry can fix (the receiver
// refused the message, the address is invalid): the notification fails at
// once.
func Permanent(err error) error { return event.Permanent(err) }

// Notice is what an event handler wants people to hear about.
type Notice struct {
	// EventID is the event being handled; a retried handler queues the
	// same notices again and nothing is sent twice.
	EventID   uuid.UUID
	EventType string
	// CustomerEmail and CustomerName address the customer; an empty
	// address skips the customer.
	CustomerEmail string
	CustomerName  string
	// Data are the facts the texts use (order_id, description,
	// instance_id, reason, refund_due, ...); webhooks receive them as is.
	Data map[string]string
}

// Notifier queues notifications (Enqueue, inside the caller's transaction)
// and delivers them (Start/Stop: the sender loop). See the package doc.
type Notifier struct {
	db       store.DB
	opts     Options
	log      *slog.Logger
	waker    cluster.Waker
	webhook  *WebhookChannel
	channels map[string]Channel

	loop startstop.Loop
}

// New returns the notifier over db. plugins provides the webhook notifier
// plugin (opts.WebhookPlugin); waker, when set, wakes the sender when
// notifications are queued (cluster.ChannelNotifications).
func New(db store.DB, plugins plugin.Plugins, opts Options, waker cluster.Waker, log *slog.Logger) (*Notifier, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.Defaults()
	if log == nil {
		log = slog.Default()
	}
	n := &Notifier{db: db, opts: opts, log: log.With("component", "notify"), waker: waker, channels: map[string]Channel{}}
	if len(opts.Webhooks) > 0 {
		if plugins == nil {
			return nil, errors.New("notify: webhooks need the plugin registry")
		}
		n.webhook = NewWebhookChannel(plugins, opts.WebhookPlugin, opts.Webhooks)
		n.channels[ChannelWebhook] = n.webhook
	}
	if opts.SMTP.Enabled() {
		email, err := NewEmailChannel(opts.SMTP)
		if err != nil {
			return nil, err
		}
		n.channels[ChannelEmail] = email
	}
	return n, nil
}

// Sends reports whether any channel is configured: without one Enqueue
// queues nothing, whatever the notice.
func (n *Notifier) Sends() bool { return len(n.channels) > 0 }

// Enqueue queues the notifications of a notice in db (the event handler's
// transaction): an e-mail to the customer and to every admin address when
// e-mail is configured, and a webhook to every endpoint. It renders the
// texts now, so that what is stored is what is sent. Inserting is all it
// does: delivery happens later, and a failing channel never holds the
// event up. It returns how many notifications were new.
func (n *Notifier) Enqueue(ctx context.Context, db store.DB, notice Notice) (int, error) {
	id := notice.EventID
	var rows []store.NewNotification
	add := func(channel, recipient, subject, body string) {
		rows = append(rows, store.NewNotification{Recipient: recipient, Channel: channel, Subject: subject, Body: body})
	}
	if n.opts.SMTP.Enabled() {
		if notice.CustomerEmail != "" && *n.opts.CustomerEmail {
			s, b := customerText(notice.EventType, notice.CustomerName, notice.Data)
			add(ChannelEmail, notice.CustomerEmail, s, b)
		}
		for _, a := range n.opts.AdminEmails {
			s, b := adminText(notice.EventType, notice.Data)
			add(ChannelEmail, a, s, b)
		}
	}
	if n.webhook != nil {
		for _, w := range n.opts.Webhooks {
			r, ok := n.webhook.render(ctx, w.Name, notice.EventType, notice.Data)
			if !ok {
				r.Subject, r.Body = webhookText(notice.EventType, w.Name, notice.Data)
			}
			add(ChannelWebhook, w.Name, r.Subject, r.Body)
		}
	}
	if len(rows) == 0 {
		return 0, nil
	}
	return store.InsertNotifications(ctx, db, &id, rows)
}

// NotifyAdmins queues a notice for the admins only in db (the caller's
// transaction): an e-mail to every admin address when e-mail is
// configured, and a webhook to every endpoint. It belongs to no event
// (event_id NULL): the caller queues it once, in the transaction that
// makes the change it tells of (a payment's dispute).
func (n *Notifier) NotifyAdmins(ctx context.Context, db store.DB, eventType string, data map[string]string) error {
	var rows []store.NewNotification
	if n.opts.SMTP.Enabled() {
		for _, a := range n.opts.AdminEmails {
			s, b := adminText(eventType, data)
			rows = append(rows, store.NewNotification{Recipient: a, Channel: ChannelEmail, Subject: s, Body: b})
		}
	}
	if n.webhook != nil {
		for _, w := range n.opts.Webhooks {
			r, ok := n.webhook.render(ctx, w.Name, eventType, data)
			if !ok {
				r.Subject, r.Body = webhookText(eventType, w.Name, data)
			}
			rows = append(rows, store.NewNotification{Recipient: w.Name, Channel: ChannelWebhook, Subject: r.Subject, Body: r.Body})
		}
	}
	_, err := store.InsertNotifications(ctx, db, nil, rows)
	return err
}

// Start runs the delivery loop until Stop or ctx's cancellation. It is safe
// on every instance at once: claims skip each other's rows.
func (n *Notifier) Start(ctx context.Context) error {
	// Subscribed before the loop starts, so no wake-up is missed.
	var wake <-chan struct{}
	unsubscribe := func() {}
	if n.waker != nil {
		wake, unsubscribe = n.waker.Subscribe(cluster.ChannelNotifications)
	}
	err := n.loop.Start(ctx, func(ctx context.Context, _ <-chan struct{}) {
		defer unsubscribe()
		n.run(ctx, wake)
	})
	if err != nil {
		unsubscribe()
		return err
	}
	n.log.Info("notification sender started", "channels", len(n.channels), "poll_interval", n.opts.PollInterval.String())
	return nil
}

// Stop ends the delivery loop after the deliveries in flight.
func (n *Notifier) Stop() { n.loop.Stop() }

func (n *Notifier) run(ctx context.Context, wake <-chan struct{}) {
	t := time.NewTicker(n.opts.PollInterval)
	defer t.Stop()
	failing := false
	for {
		more, err := n.round(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			failing = true
			n.log.Error("claiming notifications failed; retrying at the next poll", "err", err)
		case err == nil && failing:
			failing = false
			n.log.Info("claiming notifications works again")
		}
		if more {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
	}
}

// round claims one batch and delivers it; more reports a full batch.
func (n *Notifier) round(ctx context.Context) (more bool, err error) {
	lease := n.opts.SendTimeout + 30*time.Second
	rows, err := store.Q(n.db).ClaimNotifications(ctx, store.ClaimNotificationsParams{
		MaxRows: int32(n.opts.BatchSize), Lease: lease,
	})
	if err != nil {
		return false, err
	}
	sem := make(chan struct{}, n.opts.Concurrency)
	var wg sync.WaitGroup
	for _, row := range rows {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			n.deliver(ctx, row)
		})
	}
	wg.Wait()
	return len(rows) == n.opts.BatchSize, nil
}

func (n *Notifier) deliver(ctx context.Context, row store.Notification) {
	ctx, span := logging.BackgroundSpan(ctx, n.opts.Tracer, "notification.deliver")
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(attribute.String("notification.id", row.ID.String()), attribute.String("notification.channel", row.Channel))
	}
	log := n.log.With("notification_id", row.ID, "channel", row.Channel, "attempt", row.Attempts)
	if row.EventID != nil {
		log = log.With("event_id", *row.EventID)
	}
	var err error
	ch, ok := n.channels[row.Channel]
	if !ok {
		err = Permanent(fmt.Errorf("channel %s is not configured", row.Channel))
	} else {
		sctx, cancel := context.WithTimeout(ctx, n.opts.SendTimeout)
		err = ch.Send(sctx, row)
		cancel()
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err == nil {
		if rerr := store.MarkNotificationSent(rctx, n.db, row.ID, row.Attempts); rerr != nil {
			log.WarnContext(ctx, "notification sent but not recorded; it may be sent again", "err", rerr)
			return
		}
		log.InfoContext(ctx, "notification sent")
		return
	}
	span.SetStatus(codes.Error, "notification not delivered")
	backoff := event.Backoff(int(row.Attempts), n.opts.RetryBase, n.opts.RetryMax, rand.Float64())
	status, rerr := store.Q(n.db).MarkNotificationAttemptFailed(rctx, store.MarkNotificationAttemptFailedParams{
		ID:          row.ID,
		Attempts:    row.Attempts,
		GiveUp:      event.IsPermanent(err),
		MaxAttempts: int32(n.opts.MaxAttempts),
		Backoff:     backoff,
		LastError:   text.Clip(err.Error(), 2000),
	})
	switch {
	case rerr != nil:
		log.ErrorContext(ctx, "notification failed and the failure could not be recorded", "err", err, "record_err", rerr)
	case status == store.NotificationFailed:
		log.ErrorContext(ctx, "notification failed for good", "err", err)
	default:
		log.WarnContext(ctx, "notification failed; will retry", "err", err, "retry_in", backoff.Round(time.Millisecond).String())
	}
}
