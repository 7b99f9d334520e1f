package fulfillment

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/event"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/store"
)

// orderPaid is the order_paid handler the worker runs: HandleOrderPaid
// for one event, HandleOrderPaidBatch for the events of a claim round.
type orderPaid struct{ s *Service }

func (h orderPaid) Handle(ctx context.Context, e event.Event) error {
	return h.s.HandleOrderPaid(ctx, e)
}

func (h orderPaid) HandleBatch(ctx context.Context, es []event.Event) []error {
	return h.s.HandleOrderPaidBatch(ctx, es)
}

// orderProvisioned is the order_provisioned handler the worker runs.
type orderProvisioned struct{ s *Service }

func (h orderProvisioned) Handle(ctx context.Context, e event.Event) error {
	return h.s.HandleOrderProvisioned(ctx, e)
}

func (h orderProvisioned) HandleBatch(ctx context.Context, es []event.Event) []error {
	return h.s.HandleOrderProvisionedBatch(ctx, es)
}

// provisioning is one order of a batch on its way through the provider.
type provisioning struct {
	i          int // the event's index in the batch
	req        ProvisionRequest
	externalID string
	details    []byte
	err        error
}

// HandleOrderPaidBatch is HandleOrderPaid for the order_paid events of one
// claim round (each of a different order), with one transaction per step
// for the whole batch instead of one per order:
//
//  1. one transaction (its fence checks every claim in one statement): the
//     orders locked in one statement (in id order), their products and
//     instances read in one statement each; every order that is paid, has
//     a product with a provider plugin and no instance yet is moved to
//     provisioning and gets its instance row, the moves in one statement
//     (order.TransitionAll, with order.Transition the one writer of an
//     order's status) and the instance rows in one (createInstances);
//  2. the provider is called for those, concurrently, outside any
//     transaction;
//  3. one transaction: the orders locked again, the answers recorded in
//     one statement and the orders activated in one, their
//     order_provisioned events in one (recordProvisionedAll: what
//     recordProvisioned writes for each in HandleOrderPaid), every event
//     completed in one statement. The audit rows of both transactions wait
//     for their batch's next answer and go as one statement.
//
// What the batch leaves aside — an order in any other state (a retry finds
// it provisioning), a product without provider, a payload that does not
// decode — goes through HandleOrderPaid, one event at a time, after step
// 1; so does a provider's failure (provisionFailed). A failed batch
// transaction fails the attempts of its events (a lost claim hands them
// back): their retries find their orders where the batch left them, and
// HandleOrderPaid takes it from there.
func (s *Service) HandleOrderPaidBatch(ctx context.Context, es []event.Event) []error {
	errs := make([]error, len(es))
	valid := make([]bool, len(es))
	ids := make([]uuid.UUID, 0, len(es))
	for i, e := range es {
		var p order.OrderPaidPayload
		if err := e.Decode(&p); err != nil {
			errs[i] = event.Permanent(fmt.Errorf("order_paid payload: %w", err))
			continue
		}
		valid[i] = true
		ids = append(ids, e.OrderID)
	}
	if len(ids) == 0 {
		return errs
	}
	var batch []*provisioning // step 1 moved these
	var alone []int           // the events left to HandleOrderPaid
	err := event.TxAll(ctx, s.db, pick(es, valid), func(tx pgx.Tx) error {
		batch, alone = nil, nil
		q := store.Q(tx)
		orders, err := q.LockOrdersForUpdate(ctx, ids)
		if err != nil {
			return err
		}
		byID := make(map[uuid.UUID]store.Order, len(orders))
		var productIDs []uuid.UUID
		for _, o := range orders {
			byID[o.ID] = o
			if o.ProductID != nil && order.Status(o.Status) == order.StatusPaid {
				productIDs = append(productIDs, *o.ProductID)
			}
		}
		products := map[uuid.UUID]store.Product{}
		instances := map[uuid.UUID]bool{}
		if len(productIDs) > 0 {
			ps, err := q.GetProductsByID(ctx, productIDs)
			if err != nil {
				return err
			}
			for _, p := range ps {
				products[p.ID] = p
			}
			insts, err := q.GetOrdersInstances(ctx, ids)
			if err != nil {
				return err
			}
			for _, inst := range insts {
				instances[inst.OrderID] = true
			}
		}
		now := s.now()
		var movers []store.Order
		var moves []order.Move
		var picked []int
		var prods []store.Product
		for i, e := range es {
			if !valid[i] {
				continue
			}
			o, ok := byID[e.OrderID]
			var product store.Product
			if ok && o.ProductID != nil {
				product, ok = products[*o.ProductID]
			}
			if !ok || o.ProductID == nil || order.Status(o.Status) != order.StatusPaid ||
				product.ProviderPlugin == nil || instances[o.ID] {
				alone = append(alone, i)
				continue
			}
			movers, picked, prods = append(movers, o), append(picked, i), append(prods, product)
			moves = append(moves, order.Move{To: order.StatusProvisioning, By: s.actor(), At: now})
		}
		if len(movers) == 0 {
			return nil
		}
		moved, err := order.TransitionAll(ctx, tx, movers, moves)
		if err != nil {
			return err
		}
		insts, err := s.createInstances(ctx, tx, moved, prods, now)
		if err != nil {
			return err
		}
		for j, o := range moved {
			batch = append(batch, &provisioning{i: picked[j], req: ProvisionRequest{Order: o, Product: prods[j], Instance: insts[j]}})
		}
		return nil
	})
	if err != nil {
		for i := range es {
			if valid[i] {
				errs[i] = err
			}
		}
		return errs
	}

	// Step 2, and the events left aside, side by side.
	var wg sync.WaitGroup
	for _, p := range batch {
		wg.Go(func() {
			p.externalID, p.details, p.err = s.prov.Provision(ctx, p.req)
		})
	}
	for _, i := range alone {
		wg.Go(func() { errs[i] = s.HandleOrderPaid(ctx, es[i]) })
	}
	wg.Wait()

	var ok []*provisioning
	for _, p := range batch {
		if p.err == nil {
			ok = append(ok, p)
			continue
		}
		e := es[p.i]
		wg.Go(func() {
			errs[p.i] = s.provisionFailed(ctx, e, p.req, p.err,
				s.log.With("event_id", e.ID, "order_id", e.OrderID, "attempt", e.Attempt))
		})
	}
	defer wg.Wait()
	if len(ok) == 0 {
		return errs
	}

	// Step 3.
	done := make([]event.Event, len(ok))
	okIDs := make([]uuid.UUID, len(ok))
	for j, p := range ok {
		done[j], okIDs[j] = es[p.i], es[p.i].OrderID
	}
	var orphans []ProvisionRequest
	err = event.TxAll(ctx, s.db, done, func(tx pgx.Tx) error {
		orphans = nil
		orders, err := store.Q(tx).LockOrdersForUpdate(ctx, okIDs)
		if err != nil {
			return err
		}
		byID := store.ByKey(orders, func(o store.Order) uuid.UUID { return o.ID })
		os := make([]store.Order, len(ok))
		reqs := make([]*ProvisionRequest, len(ok))
		answers := make([]providerAnswer, len(ok))
		for j, p := range ok {
			e := es[p.i]
			o, found := byID[e.OrderID]
			if !found {
				return fmt.Errorf("order %s vanished while its instance was provisioned", e.OrderID)
			}
			os[j], reqs[j], answers[j] = o, &p.req, providerAnswer{p.externalID, p.details}
		}
		if orphans, err = s.recordProvisionedAll(ctx, tx, os, reqs, answers, func(j int) *slog.Logger {
			e := es[ok[j].i]
			return s.log.With("event_id", e.ID, "order_id", e.OrderID, "attempt", e.Attempt)
		}); err != nil {
			return err
		}
		return event.CompleteAll(ctx, tx, done)
	})
	for _, p := range ok {
		errs[p.i] = err
	}
	if err == nil {
		for _, req := range orphans {
			// The events are done; a failure here is logged and left to
			// order_refunded's retries (which find the instance running).
			if terr := s.terminate(ctx, req); terr != nil {
				s.log.WarnContext(ctx, "could not end the instance of a refunded order", "order_id", req.Order.ID, "err", terr)
			}
		}
	}
	return errs
}

// HandleOrderProvisionedBatch is HandleOrderProvisioned for the events of
// one claim round. Without a notification channel there is nothing to
// queue: the events are completed in one transaction, one statement.
// Otherwise each event's notices are queued in its own transaction, the
// events side by side.
func (s *Service) HandleOrderProvisionedBatch(ctx context.Context, es []event.Event) []error {
	errs := make([]error, len(es))
	if s.notifier != nil && s.notifier.Sends() {
		var wg sync.WaitGroup
		for i, e := range es {
			wg.Go(func() { errs[i] = s.HandleOrderProvisioned(ctx, e) })
		}
		wg.Wait()
		return errs
	}
	valid := make([]bool, len(es))
	n := 0
	for i, e := range es {
		var p order.OrderProvisionedPayload
		if err := e.Decode(&p); err != nil {
			errs[i] = event.Permanent(fmt.Errorf("order_provisioned payload: %w", err))
			continue
		}
		valid[i] = true
		n++
	}
	if n == 0 {
		return errs
	}
	err := event.TxAll(ctx, s.db, pick(es, valid), func(tx pgx.Tx) error {
		return event.CompleteAll(ctx, tx, pick(es, valid))
	})
	for i := range es {
		if valid[i] {
			errs[i] = err
		}
	}
	return errs
}

// pick is the events of es whose keep is true.
func pick(es []event.Event, keep []bool) []event.Event {
	out := make([]event.Event, 0, len(es))
	for i, e := range es {
		if keep[i] {
			out = append(out, e)
		}
	}
	return out
}

// createInstances is createInstance for the orders os of a batch (each
// locked in tx, without an instance), os[i] of product ps[i]: the rows in
// one statement, an audit row each. The result's i-th instance is os[i]'s.
func (s *Service) createInstances(ctx context.Context, tx pgx.Tx, os []store.Order, ps []store.Product, now time.Time) ([]store.Instance, error) {
	p := store.EnsureOrderInstancesParams{At: now}
	for i, o := range os {
		p.CustomerIds = append(p.CustomerIds, o.CustomerID)
		p.OrderIds = append(p.OrderIds, o.ID)
		p.ProductIds = append(p.ProductIds, ps[i].ID)
		p.ProviderPlugins = append(p.ProviderPlugins, *ps[i].ProviderPlugin)
		p.Names = append(p.Names, ps[i].Name)
	}
	rows, err := store.Q(tx).EnsureOrderInstances(ctx, p)
	if err != nil {
		return nil, err
	}
	if len(rows) != len(os) {
		return nil, fmt.Errorf("%d instances written for %d orders", len(rows), len(os))
	}
	byOrder := store.ByKey(rows, func(r store.Instance) uuid.UUID { return r.OrderID })
	out := make([]store.Instance, len(os))
	for i, o := range os {
		inst, ok := byOrder[o.ID]
		if !ok {
			return nil, fmt.Errorf("no instance written for order %s", o.ID)
		}
		if err := s.auditInstanceCreated(ctx, tx, o, ps[i], inst, now); err != nil {
			return nil, err
		}
		out[i] = inst
	}
	return out, nil
}

// providerAnswer is what the provider answered for one instance.
type providerAnswer struct {
	externalID string
	details    json.RawMessage
}

// recordProvisionedAll is recordProvisioned for the orders os of a batch
// (each locked in tx), os[i] provisioned as reqs[i] with answers[i]: the
// instances recorded running in one statement, the orders still
// provisioning activated together (order.TransitionAll). It returns the
// requests whose order was refunded meanwhile, whose instances must be
// ended once tx commits.
func (s *Service) recordProvisionedAll(ctx context.Context, tx pgx.Tx, os []store.Order, reqs []*ProvisionRequest, answers []providerAnswer, log func(int) *slog.Logger) ([]ProvisionRequest, error) {
	now := s.now()
	// Recorded whatever became of the orders meanwhile: the provider has
	// the instances, so they must be known to be ended.
	p := store.MarkInstancesProvisionedParams{Status: store.InstanceRunning, At: now}
	for i, req := range reqs {
		p.Ids = append(p.Ids, req.Instance.ID)
		p.ExternalIds = append(p.ExternalIds, answers[i].externalID)
		p.Details = append(p.Details, answers[i].details)
	}
	rows, err := store.Q(tx).MarkInstancesProvisioned(ctx, p)
	if err != nil {
		return nil, err
	}
	if len(rows) != len(reqs) {
		// An instance no longer provisioning fails the transaction, and
		// the events are retried.
		return nil, fmt.Errorf("%d of %d instances still provisioning: %w", len(rows), len(reqs), store.ErrNotFound)
	}
	byID := store.ByKey(rows, func(r store.Instance) uuid.UUID { return r.ID })
	var orphans []ProvisionRequest
	var active []store.Order
	var moves []order.Move
	var activated []int
	for i, req := range reqs {
		inst := byID[req.Instance.ID]
		if err := s.auditInstanceReady(ctx, tx, inst, now); err != nil {
			return nil, err
		}
		req.Instance = inst
		o := os[i]
		if order.Status(o.Status) != order.StatusProvisioning {
			// Refunded while the provider worked: the order never goes
			// active; its instance is ended after the commit
			// (order_refunded may have found it still provisioning).
			log(i).InfoContext(ctx, "order_paid: order changed while provisioning; ending the instance", "order_status", o.Status)
			if order.Status(o.Status) == order.StatusRefunded {
				orphans = append(orphans, *req)
			}
			continue
		}
		active, activated = append(active, o), append(activated, i)
		moves = append(moves, s.activeMove(&inst.ID, now))
	}
	if _, err := order.TransitionAll(ctx, tx, active, moves); err != nil {
		return nil, err
	}
	for _, i := range activated {
		log(i).InfoContext(ctx, "order provisioned", "instance_id", reqs[i].Instance.ID, "external_id", answers[i].externalID)
	}
	return orphans, nil
}
