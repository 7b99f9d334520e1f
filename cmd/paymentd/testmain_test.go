package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/rustbill/paymentd/internal/clustertest"
	"github.com/rustbill/paymentd/internal/testdb"
)

// runMainEnv makes the test binary act as paymentd itself, so tests can run
// the command as a separate process (to signal it) without building it.
const runMainEnv = "PAYMENTD_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
	}
	goleak.VerifyTestMain(removingBuilds{testdb.Main(m)})
}

// removingBuilds deletes the binaries clustertest built (the release the
// upgrade test starts from) once the tests ran.
type removingBuilds struct{ m interface{ Run() int } }

func (r removingBuilds) Run() int {
	defer clustertest.RemoveBuilt()
	return r.m.Run()
}
