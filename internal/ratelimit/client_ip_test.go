package ratelimit

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClientIP(t *testing.T) {
	t.Parallel()
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	tests := []struct {
		name    string
		trusted []netip.Prefix
		remote  string
		xff     []string
		want    string
	}{
		{"PeerAddressByDefault", nil, "192.0.2.7:5555", nil, "192.0.2.7"},
		{"ForwardedForIgnoredWithoutTrustedProxies", nil, "192.0.2.7:5555", []string{"198.51.100.1"}, "192.0.2.7"},
		{"ForwardedForIgnoredFromAnUntrustedPeer", proxies, "192.0.2.7:5555", []string{"198.51.100.1"}, "192.0.2.7"},
		{"TrustedProxyNamesTheClient", proxies, "10.1.2.3:5555", []string{"198.51.100.1"}, "198.51.100.1"},
		{"RightmostUntrustedWinsOverASpoofedLeftEntry", proxies, "10.1.2.3:5555", []string{"1.1.1.1, 198.51.100.1, 10.9.9.9"}, "198.51.100.1"},
		{"SeveralHeaderLinesAreOneList", proxies, "10.1.2.3:5555", []string{"1.1.1.1", "198.51.100.1,10.9.9.9"}, "198.51.100.1"},
		{"AllTrustedGivesTheLeftmostHop", proxies, "10.1.2.3:5555", []string{"10.0.0.9, 10.0.0.8"}, "10.0.0.9"},
		{"MalformedEntryStopsAtTheLastTrustedHop", proxies, "10.1.2.3:5555", []string{"1.1.1.1, garbage, 10.0.0.8"}, "10.0.0.8"},
		{"NoHeaderFromATrustedProxyGivesThePeer", proxies, "10.1.2.3:5555", nil, "10.1.2.3"},
		{"ForwardedEntryWithAPort", proxies, "10.1.2.3:5555", []string{"[2001:db8::1]:443"}, "2001:db8::1"},
		{"IPv6PeerAndProxy", proxies, "[2001:db8:ffff::1]:5555", []string{"2001:db8:1::5"}, "2001:db8:1::5"},
		{"IPv4MappedPeerIsUnmapped", proxies, "[::ffff:10.1.2.3]:5555", []string{"198.51.100.1"}, "198.51.100.1"},
		{"UnparsableRemoteAddrIsReturnedAsIs", proxies, "@", nil, "@"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodPost, "/", nil)
			r.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			require.Equal(t, tt.want, ClientIP(tt.trusted)(r))
		})
	}
}

func TestBucketGroupsAnIPv6ClientByItsSlash64(t *testing.T) {
	t.Parallel()
	require.Equal(t, "192.0.2.1", bucket("192.0.2.1"))
	require.Equal(t, "192.0.2.1", bucket("::ffff:192.0.2.1"))
	require.Equal(t, "2001:db8:1:2::/64", bucket("2001:db8:1:2:aaaa::1"))
	require.Equal(t, bucket("2001:db8:1:2::1"), bucket("2001:db8:1:2:ffff:ffff:ffff:ffff"))
	require.NotEqual(t, bucket("2001:db8:1:2::1"), bucket("2001:db8:1:3::1"))
	require.Equal(t, "@", bucket("@"))
}
