package orderrpc_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/rustbill/paymentd/internal/testdb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testdb.Main(m)) }
