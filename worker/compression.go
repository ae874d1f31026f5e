package worker

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"go.temporal.io/sdk/client"
)

// The values of --temporal-compression.
const (
	// CompressionAuto compresses unless the Temporal frontend is on this
	// machine (a loopback address or localhost).
	CompressionAuto = "auto"
	CompressionGzip = "gzip"
	CompressionNone = "none"
)

// checkCompression validates a --temporal-compression value.
func checkCompression(v string) error {
	switch v {
	case CompressionAuto, CompressionGzip, CompressionNone:
		return nil
	}
	return fmt.Errorf("--temporal-compression: unknown %q (want auto, gzip or none)", v)
}

// grpcCompression is the Temporal client's compression for mode and the
// frontend's address. gzip costs CPU on both ends of every call (the
// server answers a compressed request compressed): worth it on a slow or
// billed link, not to a frontend on the same machine, where a cluster of
// many workers formed on one host pays it in every start and heartbeat.
func grpcCompression(mode, address string) client.GrpcCompression {
	if mode == CompressionNone || mode == CompressionAuto && loopbackAddress(address) {
		return &client.GrpcCompressionNone{}
	}
	return &client.GrpcCompressionGzip{}
}

// loopbackAddress reports whether the gRPC target address (host:port, or
// dns:///host:port) names this machine: localhost or a loopback IP.
func loopbackAddress(address string) bool {
	if i := strings.Index(address, "://"); i >= 0 {
		address = strings.TrimLeft(address[i+3:], "/")
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
