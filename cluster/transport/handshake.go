package transport

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"net"
)

// The handshake. The dialer sends hello: magic, its node id, the cluster id
// and a nonce. The listener answers with its own nonce and a MAC over both
// nonces, both ids and the cluster id; the dialer checks it and answers
// with its MAC. A wrong cluster id or secret fails on whichever side checks
// first; the refusal says which.

// The hello's magic says what the connection carries: frames of messages,
// or one snapshot stream. Both authenticate the same way.
const (
	magic         = "TALLYRAFT1"
	magicSnapshot = "TALLYSNAP1"
)

const (
	refuseCluster = "wrong cluster id"
	refuseAuth    = "authentication failed"
)

func (t *TCP) mac(role string, client, server uint64, nc, ns []byte) []byte {
	h := hmac.New(sha256.New, t.cfg.Secret)
	h.Write([]byte(role))
	h.Write([]byte(t.cfg.ClusterID))
	h.Write(binary.BigEndian.AppendUint64(nil, client))
	h.Write(binary.BigEndian.AppendUint64(nil, server))
	h.Write(nc)
	h.Write(ns)
	return h.Sum(nil)
}

func writeField(w io.Writer, b []byte) error {
	if _, err := w.Write(binary.BigEndian.AppendUint16(nil, uint16(len(b)))); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

func readField(r io.Reader, max int) ([]byte, error) {
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(l[:]))
	if n > max {
		return nil, fmt.Errorf("handshake field of %d bytes, limit %d", n, max)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

func nonce() []byte {
	b := make([]byte, 32)
	rand.Read(b)
	return b
}

func (t *TCP) clientHandshake(c net.Conn, server uint64, kind string) error {
	nc := nonce()
	for _, f := range [][]byte{[]byte(kind), binary.BigEndian.AppendUint64(nil, t.cfg.NodeID), []byte(t.cfg.ClusterID), nc} {
		if err := writeField(c, f); err != nil {
			return err
		}
	}
	status, err := readField(c, 256)
	if err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	if string(status) != "ok" {
		return fmt.Errorf("handshake: refused by peer %d: %s", server, status)
	}
	sid, err := readField(c, 8)
	if err != nil || len(sid) != 8 {
		return fmt.Errorf("handshake: peer id: %v", err)
	}
	if got := binary.BigEndian.Uint64(sid); got != server {
		return fmt.Errorf("handshake: dialed node %d, answered by node %d", server, got)
	}
	ns, err := readField(c, 64)
	if err != nil {
		return err
	}
	smac, err := readField(c, 64)
	if err != nil {
		return err
	}
	if !hmac.Equal(smac, t.mac("server", t.cfg.NodeID, server, nc, ns)) {
		return fmt.Errorf("handshake: peer %d: %s", server, refuseAuth)
	}
	return writeField(c, t.mac("client", t.cfg.NodeID, server, nc, ns))
}

func (t *TCP) serverHandshake(r *bufio.Reader, c net.Conn) (uint64, string, error) {
	m, err := readField(r, 64)
	if err != nil || (string(m) != magic && string(m) != magicSnapshot) {
		return 0, "", fmt.Errorf("handshake: not a tally raft peer")
	}
	client, err := t.serverAuth(r, c)
	return client, string(m), err
}

// serverAuth is the listener's side of the handshake after the magic.
func (t *TCP) serverAuth(r *bufio.Reader, c net.Conn) (uint64, error) {
	cid, err := readField(r, 8)
	if err != nil || len(cid) != 8 {
		return 0, fmt.Errorf("handshake: node id: %v", err)
	}
	client := binary.BigEndian.Uint64(cid)
	cluster, err := readField(r, 256)
	if err != nil {
		return 0, err
	}
	nc, err := readField(r, 64)
	if err != nil {
		return 0, err
	}
	if string(cluster) != t.cfg.ClusterID {
		writeField(c, []byte(refuseCluster))
		return 0, fmt.Errorf("handshake: node %d: %s %q", client, refuseCluster, cluster)
	}
	ns := nonce()
	for _, f := range [][]byte{[]byte("ok"), binary.BigEndian.AppendUint64(nil, t.cfg.NodeID), ns, t.mac("server", client, t.cfg.NodeID, nc, ns)} {
		if err := writeField(c, f); err != nil {
			return 0, err
		}
	}
	cmac, err := readField(r, 64)
	if err != nil {
		return 0, fmt.Errorf("handshake: node %d: %w", client, err)
	}
	if !hmac.Equal(cmac, t.mac("client", client, t.cfg.NodeID, nc, ns)) {
		return 0, fmt.Errorf("handshake: node %d: %s", client, refuseAuth)
	}
	return client, nil
}
