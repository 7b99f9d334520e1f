package plugin

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

const benchConfig = `{"key":"merchant-secret","base_url":"https://pay.example.com"}`

func paymentInput(id string) string {
	return fmt.Sprintf(`{"payment_id":%q,"order_id":"ord_1","invoice_id":"","amount":"12.30","currency":"CNY",`+
		`"subject":"VPS","return_url":"https://shop.example.com/r","notify_url":"https://shop.example.com/n","client_ip":"203.0.113.7"}`, id)
}

func TestConcurrentCreatePaymentsGetTheirOwnResults(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.Limits.PoolSize = 4 })
	p := b.load(t, readTestdata(t, "gateway.lua"))

	const n = 100
	type result struct {
		id  string
		out string
		err error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			id := fmt.Sprintf("pay_%03d", i)
			out, err := p.Call(context.Background(), "create_payment", benchConfig, paymentInput(id))
			results[i] = result{id, out, err}
		})
	}
	close(start)
	wg.Wait()

	seen := map[string]bool{}
	for _, r := range results {
		require.NoError(t, r.err, r.id)
		var got struct {
			PaymentURL       string `json:"payment_url"`
			GatewayPaymentID string `json:"gateway_payment_id"`
			Sign             string `json:"sign"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.out), &got), r.out)
		sum := md5.Sum([]byte(r.id + "|12.30|merchant-secret"))
		require.Equal(t, "https://pay.example.com/pay/"+r.id, got.PaymentURL)
		require.Equal(t, "gw_"+r.id, got.GatewayPaymentID)
		require.Equal(t, hex.EncodeToString(sum[:]), got.Sign, r.id)
		require.False(t, seen[r.out], "duplicate result %s", r.out)
		seen[r.out] = true
	}
	require.Len(t, seen, n)

	p.mu.Lock()
	idle := len(p.idle)
	p.mu.Unlock()
	require.LessOrEqual(t, idle, 4, "no more idle states than the pool size")
}

func TestConcurrentCallsNeverShareAState(t *testing.T) {
	t.Parallel()
	// Each call writes its id into a table the script keeps, yields a
	// while in a loop, and checks the id is still its own.
	b := setup(t)
	p := b.load(t, gatewaySource(`
		local box = {}
		function create_payment(c, i)
			local id = json_decode(i).payment_id
			box.id = id
			for n = 1, 20000 do end
			if box.id ~= id then error("shared state: " .. box.id .. " ~= " .. id) end
			return json_encode({id = id})
		end`))
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Go(func() {
			_, err := p.Call(context.Background(), "create_payment", "{}", paymentInput(fmt.Sprint(i)))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}
