// Package cashier writes the cashier pages of the fake gateways
// (internal/fakes/epay, internal/fakes/alipay): a title, the trade's fields,
// then either the Pay button, or the trade's state and a link back to the
// merchant, or an error.
//
// It escapes by hand instead of using html/template on purpose: a reachable
// text/template Execute makes the linker keep every exported method of
// every type in paymentd (it cannot tell which one a template calls by
// name), which made the binary 17 MB larger and its idle RSS 5 MiB higher
// (docs/performance.md, "Idle RSS"). The fakes live in the same binary
// (`paymentd dev fake-epay`).
package cashier

import (
	"html"
	"net/http"
	"net/url"
	"strings"
)

// Field is one line of the trade's description.
type Field struct{ Label, Value string }

// Page is what a cashier page shows. Exactly one of Pay (the trade waits
// for the buyer), Done (its state: paid, closed) and Error is shown; Return
// is the link back to the merchant next to Done.
type Page struct {
	Title  string // the document title and the heading
	Small  string // the heading's small print, "(fake epay)"
	Fields []Field
	Pay    *Pay
	Done   string
	Return string
	Error  string
}

// Pay is the Pay button: a form posting TradeNo to Action.
type Pay struct{ Action, TradeNo, Label string }

const style = `body{font-family:sans-serif;max-width:28rem;margin:3rem auto}dt{color:#666}dd{margin:0 0 .6rem}button{font-size:1.2rem;padding:.5rem 2rem}`

// Write sends p with status.
func Write(w http.ResponseWriter, status int, p Page) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(Render(p)))
}

// Render is the page's HTML, every value escaped.
func Render(p Page) string {
	e := html.EscapeString
	var b strings.Builder
	b.WriteString(`<!doctype html>` + "\n" + `<html lang="zh"><head><meta charset="utf-8"><title>`)
	b.WriteString(e(p.Title + " — " + strings.Trim(p.Small, "()")))
	b.WriteString(`</title>` + "\n<style>" + style + "</style>\n</head><body>\n<h1>")
	b.WriteString(e(p.Title) + " <small>" + e(p.Small) + "</small></h1>\n")
	if len(p.Fields) > 0 {
		b.WriteString("<dl>\n")
		for _, f := range p.Fields {
			b.WriteString("<dt>" + e(f.Label) + "</dt><dd>" + e(f.Value) + "</dd>\n")
		}
		b.WriteString("</dl>\n")
	}
	switch {
	case p.Pay != nil:
		b.WriteString(`<form method="post" action="` + e(p.Pay.Action) + `"><input type="hidden" name="trade_no" value="` +
			e(p.Pay.TradeNo) + `"><button type="submit">` + e(p.Pay.Label) + "</button></form>\n")
	case p.Done != "":
		b.WriteString("<p><strong>" + e(p.Done) + "</strong></p>")
		if u := safeURL(p.Return); u != "" {
			b.WriteString(`<p><a href="` + e(u) + `">返回商户 / back to the merchant</a></p>`)
		}
		b.WriteString("\n")
	}
	if p.Error != "" {
		b.WriteString(`<p style="color:#b00">` + e(p.Error) + "</p>\n")
	}
	b.WriteString("</body></html>")
	return b.String()
}

// safeURL is u when it is an http or https URL, else "" (no link), as
// html/template refuses a javascript: URL in an href.
func safeURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") {
		return ""
	}
	return u
}
