// Package localport picks TCP ports on 127.0.0.1 for servers this project
// starts itself (a private PostgreSQL, a test cluster's paymentd nodes),
// whose port must stay theirs across a restart.
//
// Asking the kernel for port 0 gives a port from Linux's ephemeral range
// (32768 and up, /proc/sys/net/ipv4/ip_local_port_range). Once that
// listener closes, the kernel lends the port to the next outgoing
// connection or port-0 listener of any process, so a server stopped and
// started again on "its" port can find it taken. Ports here are picked
// below that range, where the kernel hands out nothing by itself.
package localport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
)

// Low and High bound the ports Free picks from: above the well-known and
// PostgreSQL's own 5432, below Linux's default ephemeral range.
const Low, High = 15433, 32767

// Free picks a random port between Low and High that nothing on 127.0.0.1
// listens on now.
func Free() (int, error) {
	for range 100 {
		if p := Low + rand.IntN(High-Low+1); IsFree(p) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("localport: no free TCP port on 127.0.0.1 between %d and %d", Low, High)
}

// IsFree reports whether port can be listened on at 127.0.0.1 now.
func IsFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}
