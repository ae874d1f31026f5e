package worker

import (
	"testing"

	"go.temporal.io/sdk/client"
)

func TestGRPCCompression(t *testing.T) {
	for _, c := range []struct {
		mode, address string
		gzip          bool
	}{
		{CompressionAuto, "127.0.0.1:7233", false},
		{CompressionAuto, "localhost:7233", false},
		{CompressionAuto, "[::1]:7233", false},
		{CompressionAuto, "dns:///127.0.0.1:7233", false},
		{CompressionAuto, "temporal.internal:7233", true},
		{CompressionAuto, "10.0.0.5:7233", true},
		{CompressionAuto, "my-ns.tmprl.cloud:7233", true},
		{CompressionGzip, "127.0.0.1:7233", true},
		{CompressionNone, "10.0.0.5:7233", false},
	} {
		_, gzip := grpcCompression(c.mode, c.address).(*client.GrpcCompressionGzip)
		if gzip != c.gzip {
			t.Errorf("--temporal-compression %s to %s: gzip %v, want %v", c.mode, c.address, gzip, c.gzip)
		}
	}
	if err := checkCompression("brotli"); err == nil {
		t.Error("--temporal-compression brotli accepted")
	}
}
