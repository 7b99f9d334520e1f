package fulfillment

import (
	"context"
	"fmt"
	"sync"

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
//     provisioning (order.Transition, the one writer of its status) and
//     gets its instance row;
//  2. the provider is called for those, concurrently, outside any
//     transaction;
//  3. one transaction: the orders locked again, each answer recorded and
//     its order activated (recordProvisioned, as HandleOrderPaid does),
//     every event completed in one statement.
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
			moved, err := order.Transition(ctx, tx, o, order.Move{To: order.StatusProvisioning, By: s.actor(), At: now})
			if err != nil {
				return err
			}
			inst, err := s.createInstance(ctx, tx, moved.Order, product, now)
			if err != nil {
				return err
			}
			batch = append(batch, &provisioning{i: i, req: ProvisionRequest{Order: moved.Order, Product: product, Instance: inst}})
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
		byID := make(map[uuid.UUID]store.Order, len(orders))
		for _, o := range orders {
			byID[o.ID] = o
		}
		for _, p := range ok {
			e := es[p.i]
			o, found := byID[e.OrderID]
			if !found {
				return fmt.Errorf("order %s vanished while its instance was provisioned", e.OrderID)
			}
			orphaned, err := s.recordProvisioned(ctx, tx, o, &p.req, p.externalID, p.details,
				s.log.With("event_id", e.ID, "order_id", e.OrderID, "attempt", e.Attempt))
			if err != nil {
				return err
			}
			if orphaned {
				orphans = append(orphans, p.req)
			}
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
