package fulfillment_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/fakes/provider"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/store"
)

// customerMail returns the subject and body of the one e-mail to the
// customer whose subject is subject.
func (r *bundle) customerMail(t *testing.T, subject string) string {
	t.Helper()
	var bodies []string
	for _, m := range r.smtp.Mails() {
		if m.To[0] == r.customer.Email && m.Header.Get("Subject") == subject {
			bodies = append(bodies, m.Body)
		}
	}
	require.Len(t, bodies, 1, "e-mails %q to the customer", subject)
	return bodies[0]
}

// webhookSubjects lists the subjects of the webhook deliveries.
func (r *bundle) webhookSubjects() []string {
	var out []string
	for _, d := range r.hook.Deliveries() {
		out = append(out, fmt.Sprint(d.Payload["subject"]))
	}
	return out
}

// An overdue order is suspended: service_suspended suspends its instance at
// the provider and records it; paid again, service_resumed brings it back.
// Each is announced to the customer, the admin and the webhook, once.
func TestSuspensionAndResumptionReachTheProvider(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{})
	id, inst := r.provisioned(t)

	r.moveOrder(t, id, move{To: order.StatusSuspended, Reason: order.SuspendReasonOverdue, Event: order.EventServiceSuspended})
	es := r.waitEventsDone(t, id, 3)
	require.Equal(t, order.EventServiceSuspended, es[2].EventType)
	require.EqualValues(t, 1, es[2].Attempts)
	require.Equal(t, store.InstanceSuspended, r.instance(t, id).Status)
	require.Equal(t, provider.StatusSuspended, r.providerStatus(t, inst.ExternalID))
	require.Equal(t, 1, r.api.ActionCalls(inst.ExternalID, "suspend"))
	r.waitNotificationsSent(t, es[2].ID, 3)
	body := r.customerMail(t, "Your service was suspended")
	require.Contains(t, body, "renewal invoice is unpaid")

	r.moveOrder(t, id, move{To: order.StatusActive, Event: order.EventServiceResumed})
	es = r.waitEventsDone(t, id, 4)
	require.Equal(t, order.EventServiceResumed, es[3].EventType)
	got := r.instance(t, id)
	require.Equal(t, store.InstanceRunning, got.Status)
	require.Nil(t, got.TerminatedAt)
	require.Equal(t, provider.StatusRunning, r.providerStatus(t, inst.ExternalID))
	require.Equal(t, 1, r.api.ActionCalls(inst.ExternalID, "unsuspend"))
	r.waitNotificationsSent(t, es[3].ID, 3)
	r.customerMail(t, "Your service was resumed")

	require.Equal(t, []string{"instance.create", "instance.provisioned", "instance.suspended", "instance.resumed"},
		r.auditActions(t, "instance", inst.ID.String()))
	require.Subset(t, r.webhookSubjects(), []string{
		"Service of order " + id.String() + " was suspended",
		"Service of order " + id.String() + " was resumed",
	}, "the webhook plugin names the service events")

	// A repeated event (a replay, a second delivery) finds the instance
	// where the order wants it: the provider is not asked again.
	_, err := store.Q(r.pool).InsertEvent(context.Background(), store.InsertEventParams{
		EventType: order.EventServiceResumed, OrderID: id, Payload: es[3].Payload,
	})
	require.NoError(t, err)
	r.waitEventsDone(t, id, 5)
	require.Equal(t, 1, r.api.ActionCalls(inst.ExternalID, "unsuspend"))
	require.Equal(t, 1, r.api.ActionCalls(inst.ExternalID, "suspend"))
}

// A terminated order's instance is terminated at the provider and in its
// row (terminated_at set, final): from active, from suspended, and when a
// service completes (its renewal turned off, its period over).
func TestAnEndedServiceIsTerminatedAtTheProvider(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{})
	fromActive, instA := r.provisioned(t)
	fromSuspended, instS := r.provisioned(t)
	completed, instC := r.provisioned(t)

	r.moveOrder(t, fromActive, move{To: order.StatusTerminated, Reason: order.EndReasonAdmin, Event: order.EventServiceTerminated})
	r.moveOrder(t, fromSuspended, move{To: order.StatusSuspended, Reason: order.SuspendReasonOverdue, Event: order.EventServiceSuspended})
	r.waitEventsDone(t, fromSuspended, 3)
	require.Equal(t, provider.StatusSuspended, r.providerStatus(t, instS.ExternalID))
	r.moveOrder(t, fromSuspended, move{To: order.StatusTerminated, Reason: order.EndReasonUnpaid, Event: order.EventServiceTerminated})
	r.moveOrder(t, completed, move{To: order.StatusCompleted, Reason: order.EndReasonNotRenewed, Event: order.EventServiceTerminated})

	for _, c := range []struct {
		order  uuid.UUID
		inst   store.Instance
		events int
		reason string
	}{
		{fromActive, instA, 3, "our staff ended it"},
		{fromSuspended, instS, 4, "renewal invoice was not paid"},
		{completed, instC, 3, "its renewal was turned off"},
	} {
		es := r.waitEventsDone(t, c.order, c.events)
		last := es[len(es)-1]
		require.Equal(t, order.EventServiceTerminated, last.EventType)
		got := r.instance(t, c.order)
		require.Equal(t, store.InstanceTerminated, got.Status)
		require.NotNil(t, got.TerminatedAt)
		require.Equal(t, provider.StatusTerminated, r.providerStatus(t, c.inst.ExternalID))
		require.Equal(t, 1, r.api.ActionCalls(c.inst.ExternalID, "terminate"))
		actions := r.auditActions(t, "instance", c.inst.ID.String())
		require.Equal(t, "instance.terminated", actions[len(actions)-1])
		rows := r.waitNotificationsSent(t, last.ID, 3)
		for _, n := range rows {
			if n.Recipient == r.customer.Email {
				require.Equal(t, "Your service has ended", n.Subject)
				require.Contains(t, n.Body, c.reason)
				require.Contains(t, n.Body, c.inst.ID.String())
			}
		}
	}

	// Terminated is final: a late service_resumed does not bring the
	// instance back, and asks the provider nothing.
	payload, err := json.Marshal(order.ServicePayload{OrderID: fromActive, InstanceID: &instA.ID})
	require.NoError(t, err)
	_, err = store.Q(r.pool).InsertEvent(context.Background(), store.InsertEventParams{
		EventType: order.EventServiceResumed, OrderID: fromActive, Payload: payload,
	})
	require.NoError(t, err)
	r.waitEventsDone(t, fromActive, 4)
	require.Equal(t, store.InstanceTerminated, r.instance(t, fromActive).Status)
	require.Zero(t, r.api.ActionCalls(instA.ExternalID, "unsuspend"))
}

// The provider fails (HTTP 500) its first three suspend calls, then works:
// the event queue retries service_suspended with its backoff, and in the
// end the order, the instance row and the provider agree.
func TestAProviderFailureIsRetriedUntilTheProviderAgrees(t *testing.T) {
	t.Parallel()
	// One HTTP request per plugin call: each failure is one event attempt.
	r := setup(t, rigOptions{maxAttempts: 6, providerHTTPAttempts: 1})
	id, inst := r.provisioned(t)
	const failures = 3
	r.api.InjectFault(provider.Fault{
		Method: "POST", Prefix: "/v1/instances/" + inst.ExternalID + "/suspend", Status: 500, Times: failures,
	})

	r.moveOrder(t, id, move{To: order.StatusSuspended, Reason: order.SuspendReasonAdmin, Event: order.EventServiceSuspended})
	es := r.waitEventsDone(t, id, 3)
	e := es[2]
	require.EqualValues(t, failures+1, e.Attempts, "three failed attempts, then the one that worked")
	require.Contains(t, e.LastError, "suspend (HTTP 500)")

	require.Equal(t, string(order.StatusSuspended), r.getOrder(t, id).Status)
	require.Equal(t, store.InstanceSuspended, r.instance(t, id).Status)
	require.Equal(t, provider.StatusSuspended, r.providerStatus(t, inst.ExternalID))
	require.Equal(t, 1, r.api.ActionCalls(inst.ExternalID, "suspend"), "the failed calls never reached the instance")
	rows := r.waitNotificationsSent(t, e.ID, 3)
	require.Len(t, rows, 3, "queued once across the retries")
	require.Contains(t, r.customerMail(t, "Your service was suspended"), "our staff suspended it")
}

// Events converge the instance on the order's status now, not on what they
// say: a service_suspended handled after the order was resumed (its first
// attempt held back, as a retry's backoff would) suspends nothing; events
// of moves committed together end where the last move leads, whichever
// runs first; an order with nothing provisioned has nothing to converge.
func TestAStaleServiceEventDoesNotUndoALaterMove(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{})

	resumed, instR := r.provisioned(t)
	r.moveOrder(t, resumed, move{To: order.StatusSuspended, Reason: order.SuspendReasonOverdue, Event: order.EventServiceSuspended, Due: time.Second})
	r.moveOrder(t, resumed, move{To: order.StatusActive, Event: order.EventServiceResumed})

	ended, instE := r.provisioned(t)
	r.moveOrder(t, ended,
		move{To: order.StatusSuspended, Reason: order.SuspendReasonOverdue, Event: order.EventServiceSuspended},
		move{To: order.StatusActive, Event: order.EventServiceResumed},
		move{To: order.StatusTerminated, Reason: order.EndReasonAdmin, Event: order.EventServiceTerminated})

	nothing := r.order(t, nil, time.Time{})
	r.pay(t, nothing)
	r.waitOrder(t, nothing, string(order.StatusActive))
	r.moveOrder(t, nothing, move{To: order.StatusSuspended, Reason: order.SuspendReasonAdmin, Event: order.EventServiceSuspended})

	es := r.waitEventsDone(t, resumed, 4)
	require.Equal(t, []string{order.EventServiceSuspended, order.EventServiceResumed}, []string{es[2].EventType, es[3].EventType})
	require.EqualValues(t, 1, es[2].Attempts)
	require.Equal(t, store.InstanceRunning, r.instance(t, resumed).Status)
	require.Equal(t, provider.StatusRunning, r.providerStatus(t, instR.ExternalID))
	require.Zero(t, r.api.ActionCalls(instR.ExternalID, "suspend"), "the stale event did not suspend")
	require.Zero(t, r.api.ActionCalls(instR.ExternalID, "unsuspend"))
	// Both moves happened: both are told.
	r.waitNotificationsSent(t, es[2].ID, 3)
	r.waitNotificationsSent(t, es[3].ID, 3)

	r.waitEventsDone(t, ended, 5)
	require.Equal(t, store.InstanceTerminated, r.instance(t, ended).Status)
	require.Equal(t, provider.StatusTerminated, r.providerStatus(t, instE.ExternalID))
	require.Zero(t, r.api.ActionCalls(instE.ExternalID, "suspend"))
	require.Zero(t, r.api.ActionCalls(instE.ExternalID, "unsuspend"))
	require.Equal(t, 1, r.api.ActionCalls(instE.ExternalID, "terminate"))

	es = r.waitEventsDone(t, nothing, 3)
	require.EqualValues(t, 1, es[2].Attempts)
	r.waitNotificationsSent(t, es[2].ID, 3)
	require.Len(t, r.api.Instances(), 2, "nothing was provisioned for the order without a provider")
}

// service_renewed asks the provider nothing; its notices carry the paid
// period.
func TestARenewalIsAnnounced(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{})
	id, inst := r.provisioned(t)
	ends := time.Date(2027, 1, 31, 16, 0, 0, 0, time.UTC)
	payload, err := json.Marshal(order.ServiceRenewedPayload{
		OrderID: id, InvoiceID: uuid.New(), Period: 2, StartsAt: ends.AddDate(0, -1, 0), EndsAt: ends,
		Amount: money.MustParse("9.90"), Currency: "CNY",
	})
	require.NoError(t, err)
	_, err = store.Q(r.pool).InsertEvent(context.Background(), store.InsertEventParams{
		EventType: order.EventServiceRenewed, OrderID: id, Payload: payload,
	})
	require.NoError(t, err)
	es := r.waitEventsDone(t, id, 3)
	rows := r.waitNotificationsSent(t, es[2].ID, 3)
	require.Len(t, rows, 3)
	body := r.customerMail(t, "Your service was renewed")
	require.Contains(t, body, "9.90 CNY")
	require.Contains(t, body, "2027-01-31T16:00:00Z")
	require.NotContains(t, body, "suspended")
	var webhook string
	for _, s := range r.webhookSubjects() {
		if strings.Contains(s, "renewed") {
			webhook = s
		}
	}
	require.Equal(t, "Service of order "+id.String()+" renewed until 2027-01-31T16:00:00Z", webhook)
	require.Equal(t, store.InstanceRunning, r.instance(t, id).Status)
	for _, a := range []string{"suspend", "unsuspend", "terminate"} {
		require.Zero(t, r.api.ActionCalls(inst.ExternalID, a))
	}
}
