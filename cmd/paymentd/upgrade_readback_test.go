package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	eventpb "github.com/rustbill/paymentd/gen/billing/event"
	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
)

// Reading every row back: the same calls on the release and on the build
// under test, answers compared whole.

// readback is what one build answered, by call.
type readback struct {
	answers map[string]proto.Message
	// lastAudit is the id of the newest audit entry read: a later build
	// may add entries (a plugin upgraded at start), but every entry up to
	// it reads back the same.
	lastAudit int64
}

// readbackOpts are the ids the Get calls read, taken from the release's
// lists so that both builds are asked the same.
type readbackOpts struct {
	customers, orders, invoices, payments, interfaces, events []string
	// refunded are the payments whose refunds are read one by one.
	refunded []string
	// auditUpTo is the release's lastAudit; 0 reads every entry.
	auditUpTo int64
	// overview reads GetRenewalOverview, which is as of the billing clock:
	// only when both builds' clocks are at the same moment.
	overview bool
}

// read asks every read call of the API about the rows, as the admin (a
// session started on the release) and as each customer (access tokens
// the release issued), and the CSV exports: the lists page by page, then
// every row of the lists by its Get. Independent calls go in parallel.
// Left out are the calls about processes rather than rows: ListNodes and
// ListLeaders (the instances running), ListCircuitBreakers (an instance's
// memory); and GetPlugin, whose record ListPlugins answers.
func (a *upgradeAPI) read(t *testing.T, r *released, o readbackOpts) *readback {
	t.Helper()
	ctx := t.Context()
	rb := &readback{answers: map[string]proto.Message{}}
	var mu sync.Mutex
	put := func(name string, m proto.Message) {
		mu.Lock()
		defer mu.Unlock()
		rb.answers[name] = m
	}
	admin := r.admin
	page := func(n uint32) *paymentpb.PageRequest { return &paymentpb.PageRequest{Page: n, PageSize: 100} }
	ipage := func(n uint32) *identitypb.PageRequest { return &identitypb.PageRequest{Page: n, PageSize: 100} }
	// pages reads every page of a list: fetch answers page n and its
	// number of pages.
	pages := func(name string, fetch func(n uint32) (proto.Message, error)) func() error {
		return func() error {
			for n := uint32(1); ; n++ {
				m, err := fetch(n)
				if err != nil {
					return fmt.Errorf("%s page %d: %w", name, n, err)
				}
				put(fmt.Sprintf("%s p%d", name, n), m)
				if n >= totalPages(m) {
					return nil
				}
			}
		}
	}
	one := func(name string, fetch func() (proto.Message, error)) func() error {
		return func() error {
			m, err := fetch()
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			put(name, m)
			return nil
		}
	}
	stats := &paymentpb.GetPaymentStatsRequest{Since: r.since}
	calls := []func() error{
		pages("ListCustomers", func(n uint32) (proto.Message, error) {
			return msg(a.customers.ListCustomers(ctx, as(admin, &identitypb.ListCustomersRequest{Pagination: ipage(n)})))
		}),
		pages("ListAdminApiKeys", func(n uint32) (proto.Message, error) {
			return msg(a.ids.ListAdminApiKeys(ctx, as(admin, &identitypb.ListAdminApiKeysRequest{Pagination: ipage(n)})))
		}),
		one("GetMe admin", func() (proto.Message, error) {
			return msg(a.ids.GetMe(ctx, as(admin, &identitypb.GetMeRequest{})))
		}),
		one("ListPlugins", func() (proto.Message, error) {
			return msg(a.gateways.ListPlugins(ctx, as(admin, &gatewaypb.ListPluginsRequest{})))
		}),
		pages("ListGatewayInterfaces", func(n uint32) (proto.Message, error) {
			return msg(a.gateways.ListGatewayInterfaces(ctx, as(admin, &gatewaypb.ListGatewayInterfacesRequest{Pagination: page(n)})))
		}),
		pages("ListProducts", func(n uint32) (proto.Message, error) {
			return msg(a.orders.ListProducts(ctx, as(admin, &orderpb.ListProductsRequest{Pagination: page(n)})))
		}),
		pages("ListOrders", func(n uint32) (proto.Message, error) {
			return msg(a.orders.ListOrders(ctx, as(admin, &orderpb.ListOrdersRequest{Pagination: page(n)})))
		}),
		pages("ListInvoices", func(n uint32) (proto.Message, error) {
			return msg(a.orders.ListInvoices(ctx, as(admin, &orderpb.ListInvoicesRequest{Pagination: page(n)})))
		}),
		pages("ListPayments", func(n uint32) (proto.Message, error) {
			return msg(a.payments.ListPayments(ctx, as(admin, &paymentpb.ListPaymentsRequest{Pagination: page(n)})))
		}),
		pages("ListPayments to_return", func(n uint32) (proto.Message, error) {
			return msg(a.payments.ListPayments(ctx, as(admin, &paymentpb.ListPaymentsRequest{Pagination: page(n), ToReturn: true})))
		}),
		pages("ListRefunds", func(n uint32) (proto.Message, error) {
			return msg(a.payAdmin.ListRefunds(ctx, as(admin, &paymentpb.ListRefundsRequest{Pagination: page(n)})))
		}),
		pages("ListEvents", func(n uint32) (proto.Message, error) {
			return msg(a.events.ListEvents(ctx, as(admin, &eventpb.ListEventsRequest{Pagination: page(n)})))
		}),
		pages("ListNotifications", func(n uint32) (proto.Message, error) {
			return msg(a.events.ListNotifications(ctx, as(admin, &eventpb.ListNotificationsRequest{Pagination: page(n)})))
		}),
		one("GetPaymentStats", func() (proto.Message, error) {
			return msg(a.payAdmin.GetPaymentStats(ctx, as(admin, stats)))
		}),
		func() error {
			// Every audit entry, newest first, as one answer: entries a
			// later build adds would shift the pages. An entry added
			// while the pages are read shifts an entry into the next
			// page too, where it is read again.
			all := &paymentpb.ListAuditEntriesResponse{}
			seen := map[string]bool{}
			for n := uint32(1); ; n++ {
				res, err := a.payAdmin.ListAuditEntries(ctx, as(admin, &paymentpb.ListAuditEntriesRequest{Pagination: page(n)}))
				if err != nil {
					return fmt.Errorf("ListAuditEntries page %d: %w", n, err)
				}
				for _, e := range res.Msg.GetEntries() {
					id, err := strconv.ParseInt(e.GetId(), 10, 64)
					if err != nil {
						return err
					}
					if (o.auditUpTo == 0 || id <= o.auditUpTo) && !seen[e.GetId()] {
						all.Entries = append(all.Entries, e)
					}
					seen[e.GetId()] = true
					rb.lastAudit = max(rb.lastAudit, id)
				}
				if n >= res.Msg.GetMeta().GetTotalPages() {
					break
				}
			}
			put("ListAuditEntries", all)
			return nil
		},
	}
	for _, zone := range []string{"UTC", "Asia/Shanghai"} {
		calls = append(calls, one("GetPaymentTrends "+zone, func() (proto.Message, error) {
			return msg(a.payAdmin.GetPaymentTrends(ctx, as(admin, &paymentpb.GetPaymentTrendsRequest{From: r.from, To: r.to, TimeZone: zone})))
		}))
	}
	if o.overview {
		calls = append(calls, one("GetRenewalOverview", func() (proto.Message, error) {
			return msg(a.orders.GetRenewalOverview(ctx, as(admin, &orderpb.GetRenewalOverviewRequest{Days: 60})))
		}))
	}
	for _, name := range slices.Sorted(maps.Keys(r.customers)) {
		c := bearerCred(r.customers[name].token)
		if name == "dave" {
			continue // disabled: his token ends with the account
		}
		calls = append(calls,
			one("GetMe "+name, func() (proto.Message, error) {
				return msg(a.ids.GetMe(ctx, as(c, &identitypb.GetMeRequest{})))
			}),
			pages("ListApiKeys "+name, func(n uint32) (proto.Message, error) {
				return msg(a.ids.ListApiKeys(ctx, as(c, &identitypb.ListApiKeysRequest{Pagination: ipage(n)})))
			}),
			pages("ListOrders "+name, func(n uint32) (proto.Message, error) {
				return msg(a.orders.ListOrders(ctx, as(c, &orderpb.ListOrdersRequest{Pagination: page(n)})))
			}),
			pages("ListInvoices "+name, func(n uint32) (proto.Message, error) {
				return msg(a.orders.ListInvoices(ctx, as(c, &orderpb.ListInvoicesRequest{Pagination: page(n)})))
			}),
			pages("ListPayments "+name, func(n uint32) (proto.Message, error) {
				return msg(a.payments.ListPayments(ctx, as(c, &paymentpb.ListPaymentsRequest{Pagination: page(n)})))
			}),
			pages("ListProducts "+name, func(n uint32) (proto.Message, error) {
				return msg(a.orders.ListProducts(ctx, as(c, &orderpb.ListProductsRequest{Pagination: page(n)})))
			}),
			one("ListPaymentMethods "+name, func() (proto.Message, error) {
				return msg(a.methods.ListPaymentMethods(ctx, as(c, &gatewaypb.ListPaymentMethodsRequest{})))
			}))
	}
	var g errgroup.Group
	g.SetLimit(8)
	for _, c := range calls {
		g.Go(c)
	}
	require.NoError(t, g.Wait())
	// The rows one by one: those of the release's lists (the release reads
	// its own).
	if o.customers == nil {
		ids := rb.ids()
		ids.auditUpTo, ids.overview = o.auditUpTo, o.overview
		o = ids
	}
	calls = nil
	for _, id := range o.customers {
		calls = append(calls, one("GetCustomer "+id, func() (proto.Message, error) {
			return msg(a.customers.GetCustomer(ctx, as(admin, &identitypb.GetCustomerRequest{Id: id})))
		}))
	}
	for _, id := range o.orders {
		calls = append(calls, one("GetOrder "+id, func() (proto.Message, error) {
			return msg(a.orders.GetOrder(ctx, as(admin, &orderpb.GetOrderRequest{Id: id})))
		}))
	}
	for _, id := range o.invoices {
		calls = append(calls, one("GetInvoice "+id, func() (proto.Message, error) {
			return msg(a.orders.GetInvoice(ctx, as(admin, &orderpb.GetInvoiceRequest{Id: id})))
		}))
	}
	for _, id := range o.payments {
		calls = append(calls, one("GetPayment "+id, func() (proto.Message, error) {
			return msg(a.payments.GetPayment(ctx, as(admin, &paymentpb.GetPaymentRequest{Id: id})))
		}))
	}
	for _, id := range o.refunded {
		calls = append(calls, one("ListRefunds "+id, func() (proto.Message, error) {
			return msg(a.payAdmin.ListRefunds(ctx, as(admin, &paymentpb.ListRefundsRequest{PaymentId: id})))
		}))
	}
	for _, id := range o.interfaces {
		calls = append(calls, one("GetGatewayInterface "+id, func() (proto.Message, error) {
			return msg(a.gateways.GetGatewayInterface(ctx, as(admin, &gatewaypb.GetGatewayInterfaceRequest{Id: id})))
		}))
	}
	for _, id := range o.events {
		calls = append(calls, one("GetEvent "+id, func() (proto.Message, error) {
			return msg(a.events.GetEvent(ctx, as(admin, &eventpb.GetEventRequest{Id: id})))
		}))
	}
	for _, c := range calls {
		g.Go(c)
	}
	require.NoError(t, g.Wait())
	// The exports come after the audit log is read: each adds an entry.
	for _, file := range []string{"payments", "refunds"} {
		g.Go(one("export "+file, func() (proto.Message, error) {
			csv, err := a.export(ctx, admin, file, url.Values{"from": {r.from}, "to": {r.to}, "tz": {"Asia/Shanghai"}})
			return wrapperspb.String(csv), err
		}))
	}
	require.NoError(t, g.Wait())
	return rb
}

// ids are the ids the Get calls of later readbacks ask for: every row the
// release's lists hold.
func (rb *readback) ids() readbackOpts {
	var o readbackOpts
	for name, m := range rb.answers {
		switch m := m.(type) {
		case *identitypb.ListCustomersResponse:
			for _, c := range m.GetCustomers() {
				o.customers = append(o.customers, c.GetId())
			}
		case *orderpb.ListOrdersResponse:
			if isAdminList(name) {
				for _, x := range m.GetOrders() {
					o.orders = append(o.orders, x.GetId())
				}
			}
		case *orderpb.ListInvoicesResponse:
			if isAdminList(name) {
				for _, x := range m.GetInvoices() {
					o.invoices = append(o.invoices, x.GetId())
				}
			}
		case *paymentpb.ListPaymentsResponse:
			if isAdminList(name) {
				for _, x := range m.GetPayments() {
					o.payments = append(o.payments, x.GetId())
					if x.GetRefundedAmount() != "0.00" {
						o.refunded = append(o.refunded, x.GetId())
					}
				}
			}
		case *paymentpb.ListRefundsResponse:
			for _, x := range m.GetRefunds() {
				o.refunded = append(o.refunded, x.GetPaymentId())
			}
		case *gatewaypb.ListGatewayInterfacesResponse:
			for _, x := range m.GetGatewayInterfaces() {
				o.interfaces = append(o.interfaces, x.GetId())
			}
		case *eventpb.ListEventsResponse:
			for _, x := range m.GetEvents() {
				o.events = append(o.events, x.GetId())
			}
		}
	}
	for _, s := range []*[]string{&o.customers, &o.orders, &o.invoices, &o.payments, &o.refunded, &o.interfaces, &o.events} {
		slices.Sort(*s)
		*s = slices.Compact(*s)
	}
	o.auditUpTo = rb.lastAudit
	return o
}

// isAdminList tells the admin's list pages ("ListOrders p1") from a
// customer's ("ListOrders alice p1") and the filtered ones.
func isAdminList(name string) bool { return adminListPage.MatchString(name) }

var adminListPage = regexp.MustCompile(`^\w+ p\d+$`)

// export downloads a CSV export.
func (a *upgradeAPI) export(ctx context.Context, c cred, file string, q url.Values) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/export/"+file+".csv?"+q.Encode(), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set(c.header, c.value)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("export %s: %s: %s", file, resp.Status, body)
	}
	return string(body), err
}

// addedSinceRelease are the fields of answers that the release does not
// send and later builds do (full protobuf names, e.g.
// "billing.order.Order.new_field"): a field added to the API after the
// release reads as its zero value there, so it is left out of the
// comparison. Every other field must read back as the release answered.
var addedSinceRelease = map[protoreflect.FullName]bool{
	// Invoice lines (issue 38): the release's invoices get one each from
	// migration 00010.
	"billing.order.Invoice.lines": true,
}

// momentFields are when an answer was computed, not what it says.
var momentFields = map[protoreflect.FullName]bool{
	"billing.payment.GetPaymentStatsResponse.as_of":  true,
	"billing.payment.GetPaymentTrendsResponse.as_of": true,
}

// compareReadbacks requires that every answer of the release reads back
// the same from the build under test, field by field, but for the fields
// above and the definitions of plugins whose files changed.
func compareReadbacks(t *testing.T, release, current *readback) {
	t.Helper()
	changed := changedPlugins(release, current)
	if len(changed) > 0 {
		t.Logf("plugins whose files differ between the builds (their definitions are not compared): %v", slices.Sorted(maps.Keys(changed)))
	}
	mismatches := 0
	for _, name := range slices.Sorted(maps.Keys(release.answers)) {
		want, ok := current.answers[name]
		if !assert.True(t, ok, "%s: not read from the build under test", name) {
			mismatches++
			continue
		}
		got := proto.Clone(want)
		want = proto.Clone(release.answers[name])
		if l, ok := got.(*gatewaypb.ListPluginsResponse); ok {
			// A plugin shipped since the release is new, not a row that
			// reads back otherwise: the release's plugins are compared.
			had := map[string]bool{}
			for _, p := range want.(*gatewaypb.ListPluginsResponse).GetPlugins() {
				had[p.GetName()] = true
			}
			var added []string
			l.Plugins = slices.DeleteFunc(l.Plugins, func(p *gatewaypb.Plugin) bool {
				if !had[p.GetName()] {
					added = append(added, p.GetName())
					return true
				}
				return false
			})
			if len(added) > 0 {
				t.Logf("plugins shipped since the release (not compared): %v", added)
			}
		}
		for _, m := range []proto.Message{want, got} {
			normalize(m.ProtoReflect(), changed)
		}
		if proto.Equal(want, got) {
			continue
		}
		mismatches++
		if mismatches <= 5 {
			t.Errorf("%s reads back otherwise than the release answered (- release, + this build):\n%s", name, lineDiff(asJSON(want), asJSON(got)))
		}
	}
	require.Zero(t, mismatches, "answers of the %d calls that read back otherwise", mismatches)
}

// lineDiff shows where two texts differ: the lines between their common
// beginning and end, with three lines of context.
func lineDiff(a, b string) string {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	pre := 0
	for pre < len(x) && pre < len(y) && x[pre] == y[pre] {
		pre++
	}
	suf := 0
	for suf < len(x)-pre && suf < len(y)-pre && x[len(x)-1-suf] == y[len(y)-1-suf] {
		suf++
	}
	var out []string
	for _, l := range x[max(0, pre-3):pre] {
		out = append(out, "  "+l)
	}
	for _, l := range x[pre : len(x)-suf] {
		out = append(out, "- "+l)
	}
	for _, l := range y[pre : len(y)-suf] {
		out = append(out, "+ "+l)
	}
	for _, l := range x[len(x)-suf : min(len(x), len(x)-suf+3)] {
		out = append(out, "  "+l)
	}
	return strings.Join(out, "\n")
}

func asJSON(m proto.Message) string {
	return protojson.MarshalOptions{Multiline: true, Indent: "  "}.Format(m)
}

// pluginDefinition are the fields of a plugin that its file decides.
var pluginDefinition = []protoreflect.Name{"version", "status", "last_error", "sha256", "has_admin_page",
	"loaded_version", "loaded_sha256", "info", "config_schema", "updated_at"}

// changedPlugins are the plugins whose stored file differs between the
// builds: each build runs with its own plugins, and the scanner stores
// the newer definition at start.
func changedPlugins(release, current *readback) map[string]bool {
	sums := func(rb *readback) map[string]string {
		out := map[string]string{}
		if l, ok := rb.answers["ListPlugins"].(*gatewaypb.ListPluginsResponse); ok {
			for _, p := range l.GetPlugins() {
				out[p.GetName()] = p.GetSha256()
			}
		}
		return out
	}
	was, is := sums(release), sums(current)
	changed := map[string]bool{}
	for name, sum := range was {
		if is[name] != sum {
			changed[name] = true
		}
	}
	return changed
}

// normalize clears, throughout m, the fields that are not compared.
func normalize(m protoreflect.Message, changed map[string]bool) {
	d := m.Descriptor()
	switch d.FullName() {
	case "billing.gateway.Plugin":
		if changed[m.Get(d.Fields().ByName("name")).String()] {
			for _, f := range pluginDefinition {
				m.Clear(d.Fields().ByName(f))
			}
		}
	case "billing.gateway.GatewayInterface":
		// The scanner replaces an interface's schema with its plugin's
		// newer one.
		if changed[m.Get(d.Fields().ByName("plugin_name")).String()] {
			for _, f := range []protoreflect.Name{"config_schema", "plugin_status", "updated_at"} {
				m.Clear(d.Fields().ByName(f))
			}
		}
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case addedSinceRelease[fd.FullName()] || momentFields[fd.FullName()]:
			m.Clear(fd)
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				normalize(v.List().Get(i).Message(), changed)
			}
		case fd.IsMap():
		case fd.Message() != nil:
			normalize(v.Message(), changed)
		}
		return true
	})
}

// msg is a response's message.
func msg[T any](res *connect.Response[T], err error) (proto.Message, error) {
	if err != nil {
		return nil, err
	}
	return any(res.Msg).(proto.Message), nil
}

// totalPages is the total_pages of a list answer's meta.
func totalPages(m proto.Message) uint32 {
	r := m.ProtoReflect()
	meta := r.Descriptor().Fields().ByName("meta")
	if meta == nil || !r.Has(meta) {
		return 1
	}
	mm := r.Get(meta).Message()
	return uint32(mm.Get(mm.Descriptor().Fields().ByName("total_pages")).Uint())
}

// without is rb but for the answers named.
func (rb *readback) without(names ...string) *readback {
	out := &readback{answers: maps.Clone(rb.answers), lastAudit: rb.lastAudit}
	for _, n := range names {
		delete(out.answers, n)
	}
	return out
}
