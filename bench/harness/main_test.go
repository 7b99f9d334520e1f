package harness

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(trivialServerEnv) != "" {
		serveTrivialH2C()
	}
	goleak.VerifyTestMain(m)
}
