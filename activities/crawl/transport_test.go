package crawl

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestIsPrivate(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"8.8.8.8": false, "1.1.1.1": false, "2606:4700::1111": false, "93.184.215.14": false,
		"127.0.0.1": true, "10.1.2.3": true, "172.16.0.1": true, "192.168.1.1": true, "169.254.169.254": true,
		"100.64.0.1": true, "0.1.2.3": true, "0.0.0.0": true, "224.0.0.1": true,
		"198.18.0.1": true, "198.19.255.255": true, "198.20.0.1": false,
		"240.0.0.1": true, "255.255.255.255": true, "239.255.255.255": true, "192.0.2.7": true,
		"::1": true, "::": true, "fe80::1": true, "fc00::1": true, "fd12::1": true, "ff02::1": true,
		"::ffff:127.0.0.1": true, "::ffff:8.8.8.8": false, "::127.0.0.1": true,
		// NAT64 and 6to4 are judged by the IPv4 address they reach.
		"64:ff9b::8.8.8.8": false, "64:ff9b::127.0.0.1": true, "64:ff9b::a9fe:a9fe": true,
		"64:ff9b::198.18.0.1": true, "64:ff9b::240.0.0.1": true, "64:ff9b:1::1": true,
		"2002:808:808::1": false, "2002:7f00:1::1": true, "2002:c0a8:101::1": true, "2002:a9fe:a9fe::": true,
		"2001::1": true, "2001:db8::1": true,
	} {
		require.Equal(t, want, isPrivate(netip.MustParseAddr(addr)), addr)
	}
}

// The guarded transport checks the address it dials: a NAT64 address
// embedding loopback is refused before any packet is sent.
func TestGuardedTransportRefusesEmbeddedPrivate(t *testing.T) {
	t.Parallel()
	tr := newTransport(Policy{DenyPrivate: true}.CheckAddr, nil)
	defer tr.CloseIdleConnections()
	for _, u := range []string{"http://[64:ff9b::7f00:1]:9/", "http://[2002:7f00:1::1]:9/", "http://198.18.0.1:9/", "http://240.0.0.1:9/"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		require.NoError(t, err)
		_, err = tr.RoundTrip(req)
		cancel()
		var pe *privateAddrError
		require.True(t, errors.As(err, &pe), "%s: %v", u, err)
	}
	for _, h := range []string{"64:ff9b::7f00:1", "[2002:c0a8:101::1]", "198.18.0.1"} {
		var pe *privateAddrError
		require.True(t, errors.As(checkPrivateHost(context.Background(), h), &pe), h)
	}
}

// FuzzIsPrivate: an address embedding IPv4 (IPv4-mapped, NAT64, 6to4) is
// private exactly when its IPv4 address is.
func FuzzIsPrivate(f *testing.F) {
	for _, a := range [][4]byte{{8, 8, 8, 8}, {127, 0, 0, 1}, {10, 0, 0, 1}, {198, 18, 0, 1}, {240, 0, 0, 1}, {169, 254, 169, 254}, {100, 64, 0, 1}} {
		f.Add(a[0], a[1], a[2], a[3], uint16(0))
	}
	f.Fuzz(func(t *testing.T, a, b, c, d byte, tail uint16) {
		v4 := netip.AddrFrom4([4]byte{a, b, c, d})
		want := isPrivate(v4)
		mapped := netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: a, 13: b, 14: c, 15: d})
		nat64 := netip.AddrFrom16([16]byte{0: 0x00, 1: 0x64, 2: 0xff, 3: 0x9b, 12: a, 13: b, 14: c, 15: d})
		six := netip.AddrFrom16([16]byte{0: 0x20, 1: 0x02, 2: a, 3: b, 4: c, 5: d, 14: byte(tail >> 8), 15: byte(tail)})
		require.Equal(t, want, isPrivate(mapped), "%s vs %s", mapped, v4)
		require.Equal(t, want, isPrivate(nat64), "%s vs %s", nat64, v4)
		require.Equal(t, want, isPrivate(six), "%s vs %s", six, v4)
	})
}
