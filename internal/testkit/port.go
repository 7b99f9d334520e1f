package testkit

import (
	"testing"

	"github.com/rustbill/paymentd/internal/localport"
)

// FreePort is a port on 127.0.0.1 that nothing listens on now, for a
// server the test starts (and may stop and start again) on it, or for a
// call that must be refused. It is below the kernel's ephemeral range
// (localport), so nothing else is lent it meanwhile.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := localport.Free()
	if err != nil {
		t.Fatal(err)
	}
	return port
}
