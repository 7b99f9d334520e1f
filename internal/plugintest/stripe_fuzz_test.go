package plugintest_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stripe/stripe-go/v84/webhook"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/plugintest"
)

// FuzzStripeSignature feeds arbitrary Stripe-Signature headers and bodies
// to the shipped stripe.lua's parse_callback, on a fixed service clock.
// It never fails (every input gets a verdict), and a webhook is found
// genuine only when stripe-go's own verifier accepts its signature too
// (webhook.ValidatePayloadIgnoringTolerance: the tolerance is checked
// against the plugin's clock, not the wall clock) and what it reports is
// what the signed body says. When the fuzzer's header is appended to a
// genuine signature (mode 1), the plugin may refuse the header as
// malformed but never call the signature bad.
func FuzzStripeSignature(f *testing.F) {
	const pid = "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f"
	paid := event("checkout.session.completed", "paid", 1230, "usd", pid)
	good := signed(paid, whsec, stripeNow)
	f.Add(uint8(0), good, string(paid))
	f.Add(uint8(0), good, strings.Replace(string(paid), "1230", "1", 1))
	f.Add(uint8(1), "v1=00", string(paid))
	f.Add(uint8(1), "t=1", string(paid))
	f.Add(uint8(1), "v0=abc", string(event("checkout.session.async_payment_failed", "unpaid", 1230, "jpy", pid)))
	f.Add(uint8(1), "", `{"type":"charge.succeeded"}`)
	f.Add(uint8(1), "", string(event("checkout.session.expired", "unpaid", 1230, "usd", pid)))
	f.Add(uint8(1), "", string(refundEvent("refund.failed", "failed", 500, "usd", "5c4b9c0e-3d0b-4e57-8f5b-0b9f7d0e1a2b")))
	f.Add(uint8(1), "", `{"type":"refund.updated","data":{"object":{"object":"refund","status":"succeeded","amount":-5,"currency":"usd","metadata":{"refund_id":"x"}}}}`)
	f.Add(uint8(0), fmt.Sprintf("t=%d,v1=%s", stripeNow.Unix(), strings.Repeat("a", 64)), string(paid))
	f.Add(uint8(0), "t=,v1=,,=,==", "")
	f.Add(uint8(0), "t=0001,v1=x", "{")
	f.Add(uint8(1), "", `{"type":"checkout.session.completed","data":{"object":{"object":"checkout.session","mode":"payment","client_reference_id":"x","payment_status":"paid","amount_total":-5,"currency":"usd"}}}`)

	// Signed bodies that are not UTF-8, and a type cut for the reason
	// inside a character: each once ended in json_encode's refusal.
	f.Add(uint8(1), "", "{\"type\":\"a\xff\"}")
	f.Add(uint8(1), "", `{"type":"`+strings.Repeat("a", 199)+`é"}`)
	f.Add(uint8(1), "", `{"type":"checkout.session.completed","data":{"object":{"object":"checkout.session","mode":"payment","client_reference_id":"x`+"\xff"+`","payment_status":"paid","amount_total":5,"currency":"usd"}}}`)

	p := loadStripe(f)
	cfg := stripeConfig("http://127.0.0.1:1")
	f.Fuzz(func(t *testing.T, mode uint8, header, payload string) {
		if mode%2 == 1 {
			g := signed([]byte(payload), whsec, stripeNow)
			if header != "" {
				g += "," + header
			}
			header = g
		}
		out, err := plugintest.CallErr(p, "parse_callback", cfg, callbackInput([]byte(payload), header))
		if err != nil {
			t.Fatalf("parse_callback failed: %v", err)
		}
		var v struct {
			Valid     bool   `json:"valid"`
			Reason    string `json:"reason"`
			Status    string `json:"status"`
			PaymentID string `json:"payment_id"`
			Amount    string `json:"amount"`
			Refund    *struct {
				RefundID string `json:"refund_id"`
				Amount   string `json:"amount"`
				Currency string `json:"currency"`
			} `json:"refund"`
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("answer %q: %v", out, err)
		}
		if mode%2 == 1 && v.Reason == "bad signature" {
			t.Fatalf("a genuine signature was called bad: header %q", header)
		}
		if !v.Valid {
			return
		}
		if err := webhook.ValidatePayloadIgnoringTolerance([]byte(payload), header, whsec); err != nil {
			t.Fatalf("found genuine, but stripe-go says %v: header %q", err, header)
		}
		if v.Status == "ignored" {
			return
		}
		// Read the body by its exact keys, as Stripe writes them and the
		// plugin reads them: encoding/json's struct fields would also take
		// "Amount_totAl" for amount_total.
		if !json.Valid([]byte(payload)) {
			t.Fatalf("found genuine, but the body is not JSON Go reads: %q", payload)
		}
		dec := json.NewDecoder(strings.NewReader(payload))
		dec.UseNumber()
		var ev map[string]any
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("found genuine, but the body is not a JSON object: %v", err)
		}
		data, _ := ev["data"].(map[string]any)
		obj, _ := data["object"].(map[string]any)
		ref, _ := obj["client_reference_id"].(string)
		if ref != "" && v.PaymentID != ref {
			t.Fatalf("reports payment %q, the body names %q", v.PaymentID, ref)
		}
		amountKey, reported := "amount_total", v.Amount
		switch v.Status {
		case "success":
		case "refund":
			// A refund report names the refund id of our metadata and
			// the refund's amount, as exactly as a success's.
			meta, _ := obj["metadata"].(map[string]any)
			rid, _ := meta["refund_id"].(string)
			if v.Refund == nil || rid == "" || v.Refund.RefundID != rid {
				t.Fatalf("a refund report %q for metadata %v", out, meta)
			}
			amountKey, reported = "amount", v.Refund.Amount
		default:
			return
		}
		// A success reports amount_total (a refund its amount) in the
		// currency's unit: exactly, or (a figure the service cannot hold)
		// in a form money.Parse refuses, never another amount.
		total, _ := obj[amountKey].(json.Number)
		currency, _ := obj["currency"].(string)
		minor, err := total.Int64()
		if err != nil || minor < 0 {
			if v.Status == "refund" && reported == "" {
				return // an amount the service cannot read is not reported
			}
			t.Fatalf("a %s for %s %v", v.Status, amountKey, obj[amountKey])
		}
		got, err := money.Parse(reported)
		if err != nil {
			return
		}
		scale := map[string]int64{"jpy": 1, "krw": 1, "vnd": 1, "clp": 1, "bhd": 10, "jod": 10, "kwd": 10, "omr": 10, "tnd": 10}[strings.ToLower(currency)]
		want := minor // cents
		switch scale {
		case 1:
			want = minor * 100
		case 10:
			want = minor / 10
		}
		if got.Cents() != want {
			t.Fatalf("reports %s for %s %d %s", reported, amountKey, minor, currency)
		}
	})
}
