package localport_test

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/localport"
)

func TestFreePicksAListenablePortBelowTheEphemeralRange(t *testing.T) {
	t.Parallel()
	p, err := localport.Free()
	require.NoError(t, err)
	require.GreaterOrEqual(t, p, localport.Low)
	require.LessOrEqual(t, p, localport.High)
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	require.NoError(t, err)
	defer l.Close()
	require.False(t, localport.IsFree(p), "a port listened on is not free")
}
