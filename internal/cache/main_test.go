package cache

import (
	"github.com/rustbill/paymentd/internal/testredis"

	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testredis.IgnoreRedial)
}
