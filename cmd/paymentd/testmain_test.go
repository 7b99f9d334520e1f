package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// runMainEnv makes the test binary act as paymentd itself, so tests can run
// the command as a separate process (to signal it) without building it.
const runMainEnv = "PAYMENTD_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
	}
	goleak.VerifyTestMain(m)
}
