package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/structpb"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
)

// procedure is one unary procedure the service serves.
type procedure struct {
	path  string // "/billing.payment.PaymentService/GetPayment"
	input protoreflect.MessageType
}

// billingProcedures lists every procedure of every billing.* service, in
// a stable order (fuzz inputs name one by its index).
func billingProcedures(tb testing.TB) []procedure {
	tb.Helper()
	var procs []procedure
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if !strings.HasPrefix(string(fd.Package()), "billing.") {
			return true
		}
		for i := range fd.Services().Len() {
			svc := fd.Services().Get(i)
			for j := range svc.Methods().Len() {
				m := svc.Methods().Get(j)
				mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Input().FullName())
				if err != nil {
					tb.Fatalf("%s: %v", m.FullName(), err)
				}
				procs = append(procs, procedure{path: "/" + string(svc.FullName()) + "/" + string(m.Name()), input: mt})
			}
		}
		return true
	})
	slices.SortFunc(procs, func(a, b procedure) int { return strings.Compare(a.path, b.path) })
	if len(procs) < 50 {
		tb.Fatalf("only %d billing procedures are registered", len(procs))
	}
	return procs
}

// nulFilled is a request of type mt whose every top-level string holds a
// NUL, and whose every Struct holds one in a key and a value.
func nulFilled(tb testing.TB, mt protoreflect.MessageType) proto.Message {
	m := mt.New()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.IsList() || fd.IsMap():
		case fd.Kind() == protoreflect.StringKind:
			m.Set(fd, protoreflect.ValueOfString("nul\x00"))
		case fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Struct":
			s, err := structpb.NewStruct(map[string]any{"k\x00": "v", "k": "v\x00"})
			if err != nil {
				tb.Fatal(err)
			}
			m.Set(fd, protoreflect.ValueOfMessage(s.ProtoReflect()))
		}
	}
	return m.Interface()
}

// callRaw sends body to a procedure over the Connect protocol (binary
// protobuf or JSON) and returns the error code the service answered ("" for
// success; "http <status>" when the answer carries none).
func callRaw(tb testing.TB, base, path string, cred credential, asJSON bool, body []byte) (code, message string) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/proto")
	if asJSON {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Connect-Protocol-Version", "1")
	cred(req.Header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		return "", ""
	}
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) != nil || e.Code == "" {
		return "http " + resp.Status, string(raw)
	}
	return e.Code, e.Message
}

// FuzzRequestsNeverInternal sends arbitrary requests — binary protobuf or
// JSON made of the fuzzer's bytes — to every procedure of every billing.*
// service of one running paymentd (real database, real plugins, a fake
// gateway), as nobody, a customer, an API key or an admin. Whatever the
// input, the answer is a success or a code that blames the request
// (InvalidArgument, NotFound, Unauthenticated, …): never Internal or
// Unknown, which would mean bad input reached somewhere it could break (a
// NUL reaching PostgreSQL did).
func FuzzRequestsNeverInternal(f *testing.F) {
	e := startPayments(f)
	procs := billingProcedures(f)
	creds := []credential{nobody, e.c.customer, e.c.key, e.c.admin}
	const nobodyI, customerI, adminI = 0, 1, 3
	index := func(path string) uint16 {
		i := slices.IndexFunc(procs, func(p procedure) bool { return p.path == path })
		if i < 0 {
			f.Fatalf("no procedure %s", path)
		}
		return uint16(i)
	}
	marshal := func(m proto.Message, asJSON bool) []byte {
		var b []byte
		var err error
		if asJSON {
			b, err = protojson.Marshal(m)
		} else {
			b, err = proto.Marshal(m)
		}
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	for i, p := range procs {
		f.Add(uint16(i), uint8(nobodyI), false, []byte{})
		f.Add(uint16(i), uint8(adminI), false, marshal(nulFilled(f, p.input), false))
		f.Add(uint16(i), uint8(customerI), true, marshal(nulFilled(f, p.input), true))
		f.Add(uint16(i), uint8(adminI), true, []byte(`{"id":"`+e.epayGW+`\u0000"}`))
	}
	// The outside probe's findings, as it sent them.
	f.Add(index("/billing.identity.IdentityService/AdminLogin"), uint8(nobodyI), true, []byte(`{"username":"ad\u0000min","password":"bootstrap-password"}`))
	f.Add(index("/billing.identity.IdentityService/Register"), uint8(nobodyI), true, []byte(`{"email":"n@example.com","password":"long enough password","name":"\u0000"}`))
	f.Add(index("/billing.identity.IdentityService/CreateApiKey"), uint8(customerI), false, marshal(&identitypb.CreateApiKeyRequest{Name: "k\x00"}, false))
	f.Add(index("/billing.order.OrderService/CreateProduct"), uint8(adminI), false, marshal(&orderpb.CreateProductRequest{Name: "\x00", Price: "1.00", Currency: "CNY"}, false))

	// The second round's Idempotency-Key: who's bit 2 sends one key per
	// procedure and caller, so inputs meet kept outcomes, replays and
	// other requests under a taken key.
	const keyedBit = 4
	for _, path := range []string{"/billing.payment.PaymentService/RefundPayment", "/billing.identity.CustomerAdminService/AdjustBalance",
		"/billing.gateway.GatewayAdminService/ConfirmBankTransfer", "/billing.order.OrderService/PayWithBalance"} {
		f.Add(index(path), uint8(adminI|keyedBit), true, []byte(`{}`))
		f.Add(index(path), uint8(customerI|keyedBit), true, []byte(`{"amount":"1.00"}`))
	}

	// The third round's times (issue 35): who's bit 3 makes body the
	// parts of an RFC 3339 time (fuzzTime) that an admin sends in every
	// time field of one of the procedures that take one (timeProcs),
	// the rest of the request valid, so the time reaches the rule, the
	// store and the audit log. Seeds: the probe's two requests as it sent
	// them, and each procedure with years 0000, 0001, 1969, 1970, 9998
	// and 9999 under extreme offsets.
	const timeBit = 8
	order := e.activeMonthlyOrder(f)
	timeProcs := timeProcedures(order, e.c.customerID.String())
	f.Add(index("/billing.order.OrderService/ExtendServicePeriod"), uint8(adminI), true,
		[]byte(`{"orderId":"`+order+`","endsAt":"9999-12-31T23:59:59-23:59","reason":"probe"}`))
	f.Add(index("/billing.identity.IdentityService/CreateAdminApiKey"), uint8(adminI), true,
		[]byte(`{"name":"probe","scope":"read","expiresAt":"9999-12-31T23:59:59-23:59"}`))
	for i := range timeProcs {
		for _, year := range []uint16{0, 1, 1969, 1970, 9998, 9999} {
			for _, offset := range []int16{0, -(23*60 + 59), 23*60 + 59} {
				f.Add(uint16(i), uint8(timeBit), i%2 == 0, timeSeed(year, offset))
			}
		}
	}

	logout := index("/billing.identity.IdentityService/Logout")
	f.Fuzz(func(t *testing.T, proc uint16, who uint8, asJSON bool, body []byte) {
		p := procs[int(proc)%len(procs)]
		cred := creds[int(who)%len(creds)]
		if int(proc)%len(procs) == int(logout) {
			// Logout would end the admin session every later input uses.
			cred = nobody
		}
		if who&keyedBit != 0 {
			cred = keyed(cred, fmt.Sprintf("fuzz-%d-%d", proc, who))
		}
		if who&timeBit != 0 {
			tp := timeProcs[int(proc)%len(timeProcs)]
			p, cred, body = procedure{path: tp.path}, e.c.admin, marshal(tp.request(fuzzTime(body)), asJSON)
		}
		code, msg := callRaw(t, e.r.baseURL, p.path, cred, asJSON, body)
		switch {
		case code == "internal", code == "unknown", strings.HasPrefix(code, "http 5"):
			t.Fatalf("%s (json %v) with %q answered %s: %s", p.path, asJSON, body, code, msg)
		}
	})
}

// timeProcedure is a procedure that takes a time, and its request with
// every time field set to one time (a date field to its date).
type timeProcedure struct {
	path    string
	request func(at string) proto.Message
}

// timeProcedures lists every procedure whose request holds a time, each
// with its other fields valid: order is an active monthly order, customer
// its customer.
func timeProcedures(order, customer string) []timeProcedure {
	date := func(at string) string { return at[:min(len(at), 10)] }
	return []timeProcedure{
		{"/billing.order.OrderService/ExtendServicePeriod", func(at string) proto.Message {
			return &orderpb.ExtendServicePeriodRequest{OrderId: order, EndsAt: at, Reason: "fuzz"}
		}},
		{"/billing.identity.IdentityService/CreateAdminApiKey", func(at string) proto.Message {
			return &identitypb.CreateAdminApiKeyRequest{Name: "fuzz", Scope: "read", ExpiresAt: at}
		}},
		{"/billing.order.OrderService/CreateInvoice", func(at string) proto.Message {
			return &orderpb.CreateInvoiceRequest{Target: &orderpb.CreateInvoiceRequest_CustomerId{CustomerId: customer}, Amount: "1.00", DueAt: at}
		}},
		{"/billing.payment.PaymentAdminService/GetPaymentStats", func(at string) proto.Message {
			return &paymentpb.GetPaymentStatsRequest{Since: at}
		}},
		{"/billing.payment.PaymentAdminService/GetPaymentTrends", func(at string) proto.Message {
			return &paymentpb.GetPaymentTrendsRequest{From: date(at), To: date(at), TimeZone: "Pacific/Kiritimati"}
		}},
		{"/billing.payment.PaymentAdminService/GetRecurringRevenue", func(at string) proto.Message {
			return &paymentpb.GetRecurringRevenueRequest{From: date(at), To: date(at), TimeZone: "Pacific/Kiritimati"}
		}},
	}
}

// fuzzTime makes an RFC 3339 time of b: two bytes of year (0000 to 9999,
// or with b[2]'s top bit one of the years at the edges), then month, day,
// hour, minute, second, up to nine fractional digits, and an offset of up
// to ±24:59 or Z. Missing bytes are zero; a byte past a field's range
// makes a time that does not exist (month 13, second 60), as a client may
// send.
func fuzzTime(b []byte) string {
	at := func(i int) int {
		if i < len(b) {
			return int(b[i])
		}
		return 0
	}
	year := (at(0)<<8 | at(1)) % 10000
	if at(2)&0x80 != 0 {
		edges := []int{0, 1, 1969, 1970, 2038, 9998, 9999}
		year = edges[at(0)%len(edges)]
	}
	s := fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02d", year, at(2)&0x7f%14, at(3)%33, at(4)%26, at(5)%61, at(6)%62)
	if n := at(7) % 10; n > 0 {
		s += "." + fmt.Sprintf("%09d", at(8)<<16|at(9)<<8|at(10))[:n]
	}
	switch at(11) % 3 {
	case 0:
		return s + "Z"
	case 1:
		return s + fmt.Sprintf("+%02d:%02d", at(12)%25, at(13)%60)
	default:
		return s + fmt.Sprintf("-%02d:%02d", at(12)%25, at(13)%60)
	}
}

// timeSeed is fuzzTime's input for the last second of year (31 Dec
// 23:59:59, or 1 Jan 00:00:00 for a year at the start of the range) with
// offset minutes east of UTC.
func timeSeed(year uint16, offset int16) []byte {
	b := []byte{byte(year >> 8), byte(year), 12, 31, 23, 59, 59, 0, 0, 0, 0, 0, 0, 0}
	if year < 5000 {
		b[2], b[3], b[4], b[5], b[6] = 1, 1, 0, 0, 0
	}
	switch {
	case offset > 0:
		b[11], b[12], b[13] = 1, byte(offset/60), byte(offset%60)
	case offset < 0:
		b[11], b[12], b[13] = 2, byte(-offset/60), byte(-offset%60)
	}
	return b
}
