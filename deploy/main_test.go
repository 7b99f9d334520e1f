// Package deploy_test holds the tests of the operations pack in deploy/: the
// Prometheus alert rules and the Grafana dashboard use only metrics paymentd
// exports and docs/operations.md documents, the alerts link to runbooks that
// exist and pass promtool's check and their unit tests (each alert on any
// increase fires on the first event), the series those alerts watch exist
// at zero from the start, and the nginx example fronts a running paymentd
// as its comments say.
package deploy_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/rustbill/paymentd/internal/testdb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testdb.Main(m)) }
