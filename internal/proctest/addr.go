package proctest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"testing"
)

// FreeAddr returns a 127.0.0.1 address whose port is free for TCP and UDP
// (a cluster node's gossip listens on both). It is drawn below the kernel's
// ephemeral range (32768 and up), where no process's outgoing connection
// can take it between this check and the server's bind.
func FreeAddr(t testing.TB) string {
	t.Helper()
	for range 200 {
		addr := fmt.Sprintf("127.0.0.1:%d", 10000+rand.IntN(22000))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		pc, err := net.ListenPacket("udp", addr)
		ln.Close()
		if err != nil {
			continue
		}
		pc.Close()
		return addr
	}
	t.Fatal("no free port below the ephemeral range after 200 tries")
	return ""
}
