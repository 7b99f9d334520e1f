package notify

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// What a notice says, per event type and audience. Data keys: order_id,
// description, customer_id, instance_id, reason, refund_due, amount,
// currency; a renewal's also invoice_id, period, starts_at, ends_at and
// resumed; a renewal reminder's invoice_id, period, kind (issued, due_soon,
// overdue), days and due_at. The webhook plugin's render produces the webhook text; these
// are the e-mails, and the webhook text when the plugin cannot render.

var webhookSubjects = map[string]string{
	"order_provisioned":  "Order {order_id} is ready",
	"order_cancelled":    "Order {order_id} was cancelled",
	"order_refunded":     "Order {order_id} was refunded",
	"service_renewed":    "Service of order {order_id} renewed until {ends_at}",
	"service_suspended":  "Service of order {order_id} was suspended",
	"service_resumed":    "Service of order {order_id} was resumed",
	"service_terminated": "Service of order {order_id} has ended",
	"renewal_reminder":   "Renewal invoice {invoice_id} of order {order_id}: {kind}",
	"dispute":            "Dispute {gateway_dispute_id} of payment {payment_id}: {status}",
	"plan_changed":       "Order {order_id} changed plan to {to_product_id}",
	"plan_change_lapsed": "Plan change of order {order_id} lapsed unpaid",
}

// Why a service was suspended or ended (the reason of service_suspended
// and service_terminated).
var suspendReasons = map[string]string{
	"overdue": "its renewal invoice is unpaid; paying it resumes the service",
	"admin":   "our staff suspended it",
	"dispute": "a payment of it is disputed with your bank",
}

var endReasons = map[string]string{
	"unpaid":      "its renewal invoice was not paid",
	"not_renewed": "its renewal was turned off and its last paid period is over",
	"admin":       "our staff ended it",
	"ended_now":   "it was ended now, before the end of its paid period",
	"refunded":    "the payment for its current period was refunded",
}

var reasons = map[string]string{
	"timeout":             "it was not paid in time",
	"provisioning_failed": "we could not set up the service",
	"customer":            "you cancelled it",
	"admin":               "it was cancelled by our staff",
}

func fill(tmpl string, data map[string]string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(tmpl, '{')
		if i < 0 {
			b.WriteString(tmpl)
			return b.String()
		}
		j := strings.IndexByte(tmpl[i:], '}')
		if j < 0 {
			b.WriteString(tmpl)
			return b.String()
		}
		b.WriteString(tmpl[:i])
		v := data[tmpl[i+1:i+j]]
		if v == "" {
			v = "?"
		}
		b.WriteString(v)
		tmpl = tmpl[i+j+1:]
	}
}

func orderName(data map[string]string) string {
	if d := data["description"]; d != "" {
		return fmt.Sprintf("%q (%s)", d, data["order_id"])
	}
	return data["order_id"]
}

// customerText is the e-mail to the customer.
func customerText(eventType, name string, data map[string]string) (subject, body string) {
	greeting := "Hello,"
	if name != "" {
		greeting = "Hello " + name + ","
	}
	order := orderName(data)
	switch eventType {
	case "order_provisioned":
		subject = "Your order is ready"
		body = fmt.Sprintf("%s\n\nyour order %s has been set up and is active now.\n", greeting, order)
		if id := data["instance_id"]; id != "" {
			body += "Instance: " + id + "\n"
		}
	case "order_cancelled":
		subject = "Your order was cancelled"
		why := reasons[data["reason"]]
		if why == "" {
			why = "it was cancelled"
		}
		body = fmt.Sprintf("%s\n\nyour order %s was cancelled: %s.\n", greeting, order, why)
		if data["refund_due"] == "true" {
			body += "\nThe amount you paid will be refunded in full.\n"
		}
	case "order_refunded":
		subject = "Your order was refunded"
		body = fmt.Sprintf("%s\n\nthe payment for your order %s was refunded in full, so its service has ended.\n", greeting, order)
		if id := data["instance_id"]; id != "" {
			body += "Instance " + id + " has been shut down.\n"
		}
	case "service_renewed":
		subject = "Your service was renewed"
		body = fmt.Sprintf("%s\n\nwe received %s %s for your order %s: its service is paid until %s.\n",
			greeting, data["amount"], data["currency"], order, data["ends_at"])
		if data["resumed"] == "true" {
			body += "\nThe service had been suspended; it runs again.\n"
		}
	case "service_suspended":
		subject = "Your service was suspended"
		why := suspendReasons[data["reason"]]
		if why == "" {
			why = "it was suspended"
		}
		body = fmt.Sprintf("%s\n\nthe service of your order %s was suspended: %s.\n", greeting, order, why)
	case "service_resumed":
		subject = "Your service was resumed"
		body = fmt.Sprintf("%s\n\nthe service of your order %s runs again.\n", greeting, order)
	case "service_terminated":
		subject = "Your service has ended"
		why := endReasons[data["reason"]]
		if why == "" {
			why = "it was ended"
		}
		body = fmt.Sprintf("%s\n\nthe service of your order %s has ended: %s.\n", greeting, order, why)
		if id := data["instance_id"]; id != "" {
			body += "Instance " + id + " has been shut down.\n"
		}
		switch data["credit_mode"] {
		case "balance":
			body += fmt.Sprintf("\n%s %s, the unused part of the period you paid for, was credited to your balance.\n", data["credited"], data["currency"])
		case "gateway":
			body += fmt.Sprintf("\n%s %s, the unused part of the period you paid for, is refunded to your payment.\n", data["credited"], data["currency"])
		}
	case "renewal_reminder":
		switch data["kind"] {
		case "issued":
			subject = "Your renewal invoice"
			body = fmt.Sprintf("%s\n\nthe invoice for the next period of your order %s is ready: %s %s, due %s.\n",
				greeting, order, data["amount"], data["currency"], data["due_at"])
		case "card_declined", "card_authentication_required":
			subject = "Your card was not charged for your renewal"
			why := "your card was declined"
			if data["kind"] == "card_authentication_required" {
				why = "your bank asks you to confirm the payment yourself"
			}
			body = fmt.Sprintf("%s\n\nwe could not charge your saved card for the renewal of your order %s, %s %s: %s. "+
				"Please pay the invoice by hand (CreatePayment with invoice_id %s); we will try the card again meanwhile.\n",
				greeting, order, data["amount"], data["currency"], why, data["invoice_id"])
		case "card_expiring":
			subject = "Your saved card expires before your next renewal"
			body = fmt.Sprintf("%s\n\nthe card saved for your order %s expires before its next renewal on %s. "+
				"Pay with a new card to save it, or the renewal will have to be paid by hand.\n", greeting, order, data["due_at"])
		case "due_soon":
			subject = "Your renewal invoice is due soon"
			body = fmt.Sprintf("%s\n\nthe renewal invoice of your order %s, %s %s, is due %s (in %s days).\n",
				greeting, order, data["amount"], data["currency"], data["due_at"], data["days"])
		default:
			subject = "Your renewal invoice is overdue"
			body = fmt.Sprintf("%s\n\nthe renewal invoice of your order %s, %s %s, was due %s, %s days ago. Paying it keeps your service running.\n",
				greeting, order, data["amount"], data["currency"], data["due_at"], data["days"])
		}
		body += "Invoice: " + data["invoice_id"] + "\n"
	case "plan_changed":
		subject = "Your plan was changed"
		body = fmt.Sprintf("%s\n\nyour order %s is on its new plan now: %s %s a period from the next renewal.\n",
			greeting, order, data["to_price"], data["currency"])
		if c := data["credited"]; c != "" && c != "0.00" {
			body += fmt.Sprintf("\n%s %s, the unused difference of the current period, was credited to your balance.\n", c, data["currency"])
		}
	case "plan_change_lapsed":
		subject = "Your plan change lapsed"
		body = fmt.Sprintf("%s\n\nthe invoice for the plan change of your order %s, %s %s, was not paid in time: the change was withdrawn and the invoice cancelled. Your order keeps its plan.\n",
			greeting, order, data["amount"], data["currency"])
		body += "Invoice: " + data["invoice_id"] + "\n"
	default:
		subject = "About your order"
		body = fmt.Sprintf("%s\n\nthere is news about your order %s (%s).\n", greeting, order, eventType)
	}
	return subject, body
}

// adminText is the e-mail to the admins: every fact, one per line.
func adminText(eventType string, data map[string]string) (subject, body string) {
	subject = "[paymentd] " + fill(webhookSubjects[eventType], data)
	if _, ok := webhookSubjects[eventType]; !ok {
		subject = "[paymentd] event " + eventType + " for order " + data["order_id"]
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "event: %s\n", eventType)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, data[k])
	}
	return subject, b.String()
}

// webhookText is what webhook.lua's render answers: a subject and a JSON
// body {event_type, recipient, data}.
func webhookText(eventType, recipient string, data map[string]string) (subject, body string) {
	subject = "Event " + eventType
	if t, ok := webhookSubjects[eventType]; ok {
		subject = fill(t, data)
	}
	b, _ := json.Marshal(map[string]any{"event_type": eventType, "recipient": recipient, "data": data})
	return subject, string(b)
}
