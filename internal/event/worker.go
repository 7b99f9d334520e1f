package event

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rustbill/paymentd/internal/cluster"
	"github.com/rustbill/paymentd/internal/logging"
	"github.com/rustbill/paymentd/internal/startstop"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testsignal"
	"github.com/rustbill/paymentd/internal/text"
)

// Leadership tells the worker whether this instance holds the event_worker
// role (*cluster.Elector implements it).
type Leadership interface {
	// Subscribe delivers the latest leadership state, at once and on
	// every change.
	Subscribe() (changes <-chan bool, unsubscribe func())
	// IsLeader is checked right before every claim.
	IsLeader() bool
}

// The defaults of WorkerOptions, and of [events] in the configuration.
const (
	DefaultPollInterval   = 5 * time.Second
	DefaultBatchSize      = 10
	DefaultMaxAttempts    = 8
	DefaultConcurrency    = 16
	DefaultHandlerTimeout = time.Minute
	DefaultLockGrace      = 30 * time.Second
	DefaultRetryBase      = 10 * time.Second
	DefaultRetryMax       = 30 * time.Minute
	DefaultDrainTimeout   = 10 * time.Second
)

// WorkerOptions configure a Worker. Zero values take the defaults above.
type WorkerOptions struct {
	// Node is this instance's node id: events.locked_by of its claims.
	Node string
	// PollInterval: how often the queue is looked at without a wake-up
	// ([events].poll_interval).
	PollInterval time.Duration
	// BatchSize: at most this many events per claim ([events].batch_size).
	BatchSize int
	// MaxAttempts: attempts before an event is failed ([events].max_attempts).
	MaxAttempts int
	// Concurrency: events handled at the same time ([events].concurrency).
	Concurrency int
	// HandlerTimeout bounds one attempt; past it the
	// handler's context is cancelled and the attempt fails.
	HandlerTimeout time.Duration
	// LockGrace is added to HandlerTimeout to make the claim's lease
	// (events.locked_until): the time after which an event whose worker
	// vanished is reclaimed. It is also how long a stopping
	// worker waits for handlers it has cancelled before it gives up on them
	// (see Stop).
	LockGrace time.Duration
	// RetryBase and RetryMax shape the backoff between attempts (see
	// Backoff).
	RetryBase time.Duration
	RetryMax  time.Duration
	// DrainTimeout: how long Stop lets running handlers finish before it
	// cancels them.
	DrainTimeout time.Duration
	// Waker wakes the worker on NOTIFY paymentd_events; nil: poll only.
	Waker cluster.Waker
	// Jitter returns a number in [0, 1) for the backoff; default random.
	Jitter func() float64
	Logger *slog.Logger
	// Tracer, when set (tracing on), gives each attempt and each periodic
	// run a span, whose trace id the lines logged for it carry.
	Tracer trace.Tracer
	// Rounds and Attempts, set by tests only, count the claim rounds (each
	// reclaim and claim, whether it found anything or not) and the attempts
	// that ended (outcome recorded or discarded), so that a test waits for
	// them instead of sleeping (internal/testsignal). Nil in the service:
	// a nil check per round and per attempt.
	Rounds, Attempts *testsignal.Signal
}

func (o *WorkerOptions) defaults() error {
	if o.Node == "" {
		return errors.New("event: worker needs the node id")
	}
	// max(v, 0) makes a negative value zero, which cmp.Or replaces.
	o.PollInterval = cmp.Or(max(o.PollInterval, 0), DefaultPollInterval)
	o.BatchSize = cmp.Or(max(o.BatchSize, 0), DefaultBatchSize)
	o.MaxAttempts = cmp.Or(max(o.MaxAttempts, 0), DefaultMaxAttempts)
	o.Concurrency = cmp.Or(max(o.Concurrency, 0), DefaultConcurrency)
	o.HandlerTimeout = cmp.Or(max(o.HandlerTimeout, 0), DefaultHandlerTimeout)
	o.LockGrace = cmp.Or(max(o.LockGrace, 0), DefaultLockGrace)
	o.RetryBase = cmp.Or(max(o.RetryBase, 0), DefaultRetryBase)
	o.RetryMax = cmp.Or(max(o.RetryMax, 0), DefaultRetryMax)
	o.DrainTimeout = cmp.Or(max(o.DrainTimeout, 0), DefaultDrainTimeout)
	if o.RetryMax < o.RetryBase {
		o.RetryMax = o.RetryBase
	}
	if o.Jitter == nil {
		o.Jitter = randomJitter
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// Periodic is a task the worker runs while it leads: at once when it gains
// the role and then every Every (the payment timeout scan).
type Periodic struct {
	Name  string
	Every time.Duration
	Run   func(ctx context.Context) error
	// Rounds, set by tests only, counts the runs (Begin and Done around
	// each), so that a test waits for a run that began after it changed
	// the clock instead of sleeping. Nil in the service.
	Rounds *testsignal.Signal
}

// Worker consumes the event queue while this instance holds the
// event_worker role. See the package doc.
type Worker struct {
	db       store.DB
	leader   Leadership
	opts     WorkerOptions
	log      *slog.Logger
	handlers map[string]Handler
	periodic []Periodic
	// leaderRole is the lease role every handler transaction checks
	// (Event.Tx): the leader's Role() when it has one, as *cluster.Elector
	// does; empty, only the claim is checked.
	leaderRole string

	// slots bounds the handlers running in this process, across
	// sessions: a handler that ignores its cancellation keeps its slot
	// after its session ended, until it returns.
	slots chan struct{}
	// kick wakes the claim loop: a slot is free, or an order's handler
	// returned (its next event may be due).
	kick chan struct{}
	// busy counts, per order, the handler goroutines of this process that
	// have not returned yet, of this session or an earlier one. The claim
	// skips these orders, so a new attempt never overlaps one that outlived
	// its claim (its event reclaimed, its session ended).
	busyMu sync.Mutex
	busy   map[uuid.UUID]int

	loop startstop.Loop
}

// NewWorker returns a worker over db that consumes while leader says so.
// Register handlers (Handle) and periodic tasks before Start.
func NewWorker(db store.DB, leader Leadership, opts WorkerOptions) (*Worker, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	w := &Worker{
		db: db, leader: leader, opts: opts, handlers: map[string]Handler{},
		log:   opts.Logger.With("node", opts.Node, "component", "event_worker"),
		slots: make(chan struct{}, opts.Concurrency), kick: make(chan struct{}, 1),
		busy: map[uuid.UUID]int{},
	}
	if r, ok := leader.(interface{ Role() string }); ok {
		w.leaderRole = r.Role()
	}
	return w, nil
}

// Handle registers h for events of eventType. Call it before Start.
func (w *Worker) Handle(eventType string, h Handler) {
	w.handlers[eventType] = h
}

// Every registers a periodic task. Call it before Start.
func (w *Worker) Every(p Periodic) {
	w.periodic = append(w.periodic, p)
}

// Start runs the worker in the background until Stop or ctx's cancellation.
// Stop drains (running handlers get DrainTimeout to finish); cancelling ctx
// cancels running handlers at once and hands their events back.
func (w *Worker) Start(ctx context.Context) error {
	return w.loop.Start(ctx, w.run)
}

// Stop stops claiming, lets running handlers finish for up to
// DrainTimeout, cancels the rest (their events go back to pending without
// counting the attempt), and returns when nothing runs any more — or
// LockGrace after the cancellation, when a handler ignores it: that one is
// abandoned (logged), its outcome will be refused when it returns, and its
// event is reclaimed when the claim expires.
func (w *Worker) Stop() { w.loop.Drain() }

func (w *Worker) run(ctx context.Context, stopping <-chan struct{}) {
	changes, unsubscribe := w.leader.Subscribe()
	defer unsubscribe()
	var wake <-chan struct{}
	if w.opts.Waker != nil {
		var unsubscribeWake func()
		wake, unsubscribeWake = w.opts.Waker.Subscribe(cluster.ChannelEvents)
		defer unsubscribeWake()
	}
	var s *session
	for {
		select {
		case <-stopping:
			if s != nil {
				s.stop(true)
				w.log.Info("event worker stopped")
			}
			return
		case <-ctx.Done():
			if s != nil {
				s.stop(false)
				w.log.Info("event worker stopped (context cancelled)")
			}
			return
		case leading := <-changes:
			switch {
			case leading && s == nil:
				s = w.lead(ctx, wake)
				w.log.Info("event worker consuming", "poll_interval", w.opts.PollInterval.String(),
					"batch_size", w.opts.BatchSize, "concurrency", w.opts.Concurrency)
			case !leading && s != nil:
				s.stop(false)
				s = nil
				w.log.Warn("event worker paused: not the event_worker leader any more")
			}
		}
	}
}

// session is one stretch of leadership: a claim loop and the handlers it
// started.
type session struct {
	w          *Worker
	loopCancel context.CancelFunc
	loopDone   chan struct{}
	// handlers' context: cancelled when the session ends, not before.
	hctx     context.Context
	hcancel  context.CancelFunc
	inflight sync.WaitGroup
	running  atomic.Int64
	// lastReclaim: expired claims are looked for once per poll interval,
	// not on every wake-up (they only appear after a lease has run out).
	lastReclaim time.Time
}

func (w *Worker) lead(parent context.Context, wake <-chan struct{}) *session {
	loopCtx, loopCancel := context.WithCancel(parent)
	hctx, hcancel := context.WithCancel(context.WithoutCancel(parent))
	s := &session{
		w: w, loopCancel: loopCancel, loopDone: make(chan struct{}),
		hctx: hctx, hcancel: hcancel,
	}
	go s.loop(loopCtx, wake)
	for _, p := range w.periodic {
		s.inflight.Add(1)
		go func() {
			defer s.inflight.Done()
			s.every(loopCtx, p)
		}()
	}
	return s
}

// stop ends the session: no more claims; with drain, running handlers get
// DrainTimeout to finish before they are cancelled. Cancelled handlers get
// LockGrace to return; one that ignores its context is abandoned: it keeps
// its order busy and its slot until it returns, and its outcome is refused
// then if its claim was reclaimed meanwhile.
func (s *session) stop(drain bool) {
	s.loopCancel()
	<-s.loopDone
	finished := make(chan struct{})
	go func() { s.inflight.Wait(); close(finished) }()
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-finished:
			return true
		case <-t.C:
			return false
		}
	}
	if drain && !wait(s.w.opts.DrainTimeout) {
		s.w.log.Warn("handlers still running after the drain timeout; cancelling them",
			"running", s.running.Load(), "drain_timeout", s.w.opts.DrainTimeout.String())
	}
	s.hcancel()
	if !wait(s.w.opts.LockGrace) {
		s.w.log.Error("handlers ignore their cancelled context; giving up on them: their outcome is refused "+
			"once their claims are reclaimed, and their orders are not claimed here until they return",
			"running", s.running.Load(), "waited", s.w.opts.LockGrace.String())
	}
}

func (s *session) loop(ctx context.Context, wake <-chan struct{}) {
	defer close(s.loopDone)
	poll := time.NewTicker(s.w.opts.PollInterval)
	defer poll.Stop()
	failing := false
	for {
		err := s.round(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			failing = true
			s.w.log.Error("claiming events failed; retrying at the next poll", "err", err)
		case err == nil && failing:
			failing = false
			s.w.log.Info("claiming events works again")
		}
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		case <-wake:
		case <-s.w.kick:
		}
	}
}

// round reclaims expired claims and claims what the free slots can take.
func (s *session) round(ctx context.Context) error {
	w := s.w
	w.opts.Rounds.Begin()
	defer w.opts.Rounds.Done()
	if !w.leader.IsLeader() {
		return nil // the trust window closed; the elector will tell us
	}
	if time.Since(s.lastReclaim) >= w.opts.PollInterval {
		reclaimed, err := store.Q(w.db).ReclaimExpiredEvents(ctx, int32(w.opts.MaxAttempts))
		if err != nil {
			return fmt.Errorf("reclaim expired claims: %w", err)
		}
		s.lastReclaim = time.Now()
		for _, r := range reclaimed {
			log := w.log.With("event_id", r.ID, "order_id", r.OrderID,
				"event_type", r.EventType, "status", r.Status, "attempts", r.Attempts)
			if w.isBusy(r.OrderID) {
				log.Error("reclaimed an event whose handler still runs here past its claim (it ignores its context); " +
					"its outcome will be refused, and its order waits until it returns")
				continue
			}
			log.Warn("reclaimed an event whose worker vanished")
		}
	}
	free := cap(w.slots) - len(w.slots)
	if free <= 0 {
		return nil // a finishing handler kicks the loop
	}
	limit := min(w.opts.BatchSize, free)
	lease := w.opts.HandlerTimeout + w.opts.LockGrace
	claimed, err := store.ClaimEvents(ctx, w.db, w.opts.Node, limit, lease, w.busyOrders(), w.leaderRole)
	if err != nil {
		return fmt.Errorf("claim events: %w", err)
	}
	// The events of a type whose handler batches go to it together, in
	// one goroutine that holds their slots and orders; the rest run one
	// goroutine each.
	var batches map[string][]store.Event
	for _, row := range claimed {
		w.slots <- struct{}{} // never blocks: at most free were claimed, and only this loop takes slots
		w.markBusy(row.OrderID, 1)
		if _, ok := w.handlers[row.EventType].(BatchHandler); ok {
			if batches == nil {
				batches = map[string][]store.Event{}
			}
			batches[row.EventType] = append(batches[row.EventType], row)
			continue
		}
		s.start([]store.Event{row}, func() { s.handle(row) })
	}
	for _, rows := range batches {
		if len(rows) == 1 {
			s.start(rows, func() { s.handle(rows[0]) })
			continue
		}
		s.start(rows, func() { s.handleBatch(rows) })
	}
	if len(claimed) == limit {
		w.poke() // there may be more
	}
	return nil
}

// start runs fn, the handling of rows (their slots taken, their orders
// marked busy), in a goroutine of the session, and frees both when it
// returns.
func (s *session) start(rows []store.Event, fn func()) {
	w := s.w
	s.inflight.Add(1)
	s.running.Add(int64(len(rows)))
	go func() {
		defer func() {
			s.running.Add(-int64(len(rows)))
			for _, row := range rows {
				w.markBusy(row.OrderID, -1)
				<-w.slots
			}
			s.inflight.Done()
			w.poke() // slots are free, and the orders' next events may be due
		}()
		fn()
	}()
}

func (w *Worker) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// markBusy adds d to the handler goroutines running for order.
func (w *Worker) markBusy(order uuid.UUID, d int) {
	w.busyMu.Lock()
	defer w.busyMu.Unlock()
	if w.busy[order] += d; w.busy[order] <= 0 {
		delete(w.busy, order)
	}
}

func (w *Worker) isBusy(order uuid.UUID) bool {
	w.busyMu.Lock()
	defer w.busyMu.Unlock()
	return w.busy[order] > 0
}

// busyOrders is the orders a handler of this process still runs for.
func (w *Worker) busyOrders() []uuid.UUID {
	w.busyMu.Lock()
	defer w.busyMu.Unlock()
	out := make([]uuid.UUID, 0, len(w.busy))
	for id := range w.busy {
		out = append(out, id)
	}
	return out
}

// attempt is one claimed event as the worker runs it.
type attempt struct {
	e     Event
	claim store.Claim
	log   *slog.Logger
}

func (s *session) attempt(row store.Event) attempt {
	w := s.w
	e := fromRow(row, w.opts.MaxAttempts)
	claim := store.ClaimOf(row)
	e.claim, e.leaderRole = &claim, w.leaderRole
	return attempt{e: e, claim: claim,
		log: w.log.With("event_id", e.ID, "event_type", e.Type, "order_id", e.OrderID, "attempt", e.Attempt)}
}

// handle runs one attempt and records its outcome. Every outcome statement
// names the claim's token: when the claim was reclaimed meanwhile (the
// handler outlived it), the outcome is discarded.
func (s *session) handle(row store.Event) {
	w := s.w
	defer w.opts.Attempts.Done() // last: after the outcome is written
	a := s.attempt(row)
	e := a.e
	// The attempt's span: its lines, the handler's included, carry its
	// trace id.
	sctx, span := logging.BackgroundSpan(s.hctx, w.opts.Tracer, "event.handle")
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(attribute.String("event.id", e.ID.String()), attribute.String("event.type", e.Type),
			attribute.String("order.id", e.OrderID.String()), attribute.Int("event.attempt", e.Attempt))
	}

	ctx, cancel := context.WithTimeout(sctx, w.opts.HandlerTimeout)
	start := time.Now()
	err := w.call(ctx, e)
	timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
	cancel()
	if err != nil {
		span.SetStatus(codes.Error, "event attempt failed")
	}
	s.finish(sctx, a, err, timedOut, time.Since(start))
}

// handleBatch runs the attempts of rows, events of one type whose handler
// is a BatchHandler, as one call of HandleBatch, then records each
// outcome as handle does (one statement per outcome the handler did not
// write itself: a failure, a hand-back, a success it left to the worker).
func (s *session) handleBatch(rows []store.Event) {
	w := s.w
	defer func() {
		for range rows {
			w.opts.Attempts.Done() // last: after the outcomes are written
		}
	}()
	as := make([]attempt, len(rows))
	events := make([]Event, len(rows))
	for i, row := range rows {
		as[i] = s.attempt(row)
		events[i] = as[i].e
	}
	sctx, span := logging.BackgroundSpan(s.hctx, w.opts.Tracer, "event.handle_batch")
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(attribute.String("event.type", events[0].Type), attribute.Int("event.count", len(events)))
	}
	ctx, cancel := context.WithTimeout(sctx, w.opts.HandlerTimeout)
	start := time.Now()
	errs := w.callBatch(ctx, events)
	timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
	cancel()
	took := time.Since(start)
	for i, a := range as {
		if errs[i] != nil {
			span.SetStatus(codes.Error, "event attempt failed")
		}
		s.finish(sctx, a, errs[i], timedOut, took)
	}
}

// finish records the outcome err of attempt a.
func (s *session) finish(sctx context.Context, a attempt, err error, timedOut bool, d time.Duration) {
	w, e, claim, log := s.w, a.e, a.claim, a.log
	took := d.Round(time.Millisecond).String()
	// The outcome is written even while stopping: a context of its own.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(sctx), 10*time.Second)
	defer rcancel()
	lost := func(what string, rerr error) {
		if errors.Is(rerr, store.ErrNotFound) {
			log.WarnContext(sctx, "attempt outcome discarded: its claim was reclaimed (the handler outlived it)",
				"outcome", what, "err", err, "took", took)
			return
		}
		log.ErrorContext(sctx, "could not record the attempt's outcome; its claim expires", "outcome", what, "err", err, "record_err", rerr)
	}
	switch {
	case e.completed():
		// Done in the handler's last transaction, which committed.
		if err != nil {
			log.ErrorContext(sctx, "event done, but its handler returned an error after completing it (a bug in the handler)", "err", err, "took", took)
			return
		}
		log.InfoContext(sctx, "event done", "took", took)
	case err == nil:
		if rerr := store.CompleteEvent(rctx, w.db, claim); rerr != nil {
			lost("done", rerr)
			return
		}
		log.InfoContext(sctx, "event done", "took", took)
	case (s.hctx.Err() != nil && !timedOut) || errors.Is(err, store.ErrClaimLost):
		// Stopped under the handler's feet, or its node lost the leader
		// role its transactions are fenced with: not the event's fault.
		if rerr := store.ReleaseEvent(rctx, w.db, claim); rerr != nil {
			lost("handed back", rerr)
			return
		}
		log.InfoContext(sctx, "event handed back: the worker is stopping or lost its role", "err", err)
	default:
		if timedOut {
			err = fmt.Errorf("handler timed out after %s: %w", w.opts.HandlerTimeout, err)
		}
		maxAttempts := w.opts.MaxAttempts
		if IsPermanent(err) {
			maxAttempts = e.Attempt // fail now
		}
		backoff := Backoff(e.Attempt, w.opts.RetryBase, w.opts.RetryMax, w.opts.Jitter())
		status, rerr := store.Q(w.db).FailEventAttempt(rctx, store.FailEventAttemptParams{
			MaxAttempts: int32(maxAttempts), Backoff: backoff, LastError: text.Clip(err.Error(), 2000),
			ID: claim.ID, ClaimToken: &claim.Token,
		})
		switch {
		case rerr != nil:
			lost("failed", rerr)
		case status == store.EventFailed:
			log.ErrorContext(sctx, "event failed for good; an admin can retry it", "err", err, "took", took)
		default:
			log.WarnContext(sctx, "event attempt failed; will retry", "err", err, "retry_in", backoff.Round(time.Millisecond).String(), "took", took)
		}
	}
}

// callBatch runs the batch handler of events (of one type), turning a
// panic into an error for each of them and a short answer into an error
// for each event it did not answer for.
func (w *Worker) callBatch(ctx context.Context, events []Event) (errs []error) {
	h := w.handlers[events[0].Type].(BatchHandler)
	defer func() {
		if r := recover(); r != nil {
			w.log.ErrorContext(ctx, "event batch handler panicked", "event_type", events[0].Type, "events", len(events),
				"panic", r, "stack", string(debug.Stack()))
			errs = make([]error, len(events))
			for i := range errs {
				errs[i] = fmt.Errorf("batch handler panicked: %v", r)
			}
		}
	}()
	errs = h.HandleBatch(ctx, events)
	if len(errs) != len(events) {
		got := errs
		errs = make([]error, len(events))
		for i := range errs {
			if i < len(got) {
				errs[i] = got[i]
			} else {
				errs[i] = fmt.Errorf("batch handler answered for %d of %d events", len(got), len(events))
			}
		}
	}
	return errs
}

// call runs the handler of e, turning a panic into an error.
func (w *Worker) call(ctx context.Context, e Event) (err error) {
	h, ok := w.handlers[e.Type]
	if !ok {
		return fmt.Errorf("no handler registered for event type %q", e.Type)
	}
	defer func() {
		if r := recover(); r != nil {
			w.log.ErrorContext(ctx, "event handler panicked", "event_id", e.ID, "event_type", e.Type, "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return h.Handle(ctx, e)
}

// every runs a periodic task while the session lasts.
func (s *session) every(ctx context.Context, p Periodic) {
	every := p.Every
	if every <= 0 {
		every = time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	failing := false
	run := func() {
		p.Rounds.Begin()
		defer p.Rounds.Done()
		// Each run is a span: the task's lines carry its trace id.
		rctx, span := logging.BackgroundSpan(ctx, s.w.opts.Tracer, "periodic.run")
		defer span.End()
		if span.IsRecording() {
			span.SetAttributes(attribute.String("task", p.Name))
		}
		err := p.Run(rctx)
		switch {
		case ctx.Err() != nil:
		case err != nil && !failing:
			failing = true
			span.SetStatus(codes.Error, "periodic task failed")
			s.w.log.ErrorContext(rctx, "periodic task failed", "task", p.Name, "err", err)
		case err == nil && failing:
			failing = false
			s.w.log.InfoContext(rctx, "periodic task works again", "task", p.Name)
		}
	}
	for {
		if s.w.leader.IsLeader() {
			run()
			if ctx.Err() != nil {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
