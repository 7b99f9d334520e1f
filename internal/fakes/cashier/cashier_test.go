package cashier

import (
	"strings"
	"testing"
)

func TestRenderEscapesEveryValue(t *testing.T) {
	got := Render(Page{
		Title:  "收银台",
		Small:  "(fake epay)",
		Fields: []Field{{"商品 / item", `<script>alert("x")</script>`}},
		Pay:    &Pay{Action: "/pay", TradeNo: `1"><b>`, Label: "Pay"},
	})
	for _, bad := range []string{"<script>", `1"><b>`} {
		if strings.Contains(got, bad) {
			t.Errorf("page holds %q unescaped:\n%s", bad, got)
		}
	}
	for _, want := range []string{"<title>收银台 — fake epay</title>", "&lt;script&gt;", `value="1&#34;&gt;&lt;b&gt;"`, `action="/pay"`} {
		if !strings.Contains(got, want) {
			t.Errorf("page lacks %q:\n%s", want, got)
		}
	}
}

func TestRenderLinksBackOnlyToAWebURL(t *testing.T) {
	ok := Render(Page{Title: "t", Done: "已支付 / paid", Return: "https://shop.example/r?a=1&b=2"})
	if !strings.Contains(ok, `<a href="https://shop.example/r?a=1&amp;b=2">`) {
		t.Errorf("no link back to the merchant:\n%s", ok)
	}
	bad := Render(Page{Title: "t", Done: "已支付 / paid", Return: "javascript:alert(1)"})
	if strings.Contains(bad, "<a ") || strings.Contains(bad, "javascript") {
		t.Errorf("a javascript: URL became a link:\n%s", bad)
	}
	if !strings.Contains(bad, "<strong>已支付 / paid</strong>") {
		t.Errorf("the state is missing:\n%s", bad)
	}
}
