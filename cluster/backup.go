package cluster

import (
	"context"
	"errors"
	"net/http"
	"time"

	"tally/backup"
	"tally/cluster/node"
)

// BackupPath is the route a node streams a backup of the whole cluster
// from: an operator's request signed with the join secret, as
// transfer-leader and remove-node are.
const BackupPath = "/v1/cluster/backup"

// BackupErrorTrailer carries why a backup stopped after its first bytes
// (the status was sent): the stream then lacks its end line, so the file
// does not verify either way.
const BackupErrorTrailer = "Tally-Backup-Error"

// SignedAt is an operator's read of the cluster's data (a backup, the
// placements): signed with the join secret for one node at an instant
// (good for SignatureMax around the node's clock, once). What it asks for
// is part of its signature.
type SignedAt struct {
	Signed
	what string
}

// SignBackup makes a backup request for the node to, signed with the join
// secret at at.
func SignBackup(secret string, to Target, at time.Time) SignedAt {
	return signAt(secret, "backup", to, at)
}

func signAt(secret, what string, to Target, at time.Time) SignedAt {
	r := SignedAt{what: what}
	sign(secret, to, at, &r)
	return r
}

func (r *SignedAt) envelope() (string, *Signed, []any) { return r.what, &r.Signed, nil }

// decodeSignedAt reads an operator's read of what and checks its
// signature, its instant, its node and its nonce, answering the refusal
// itself when one fails.
func (c *Node) decodeSignedAt(w http.ResponseWriter, r *http.Request, what string) bool {
	return c.decodeSigned(w, r, &SignedAt{what: what})
}

// handleBackup streams a backup of every session of the cluster from this
// node's replica: every data group is first read at a linearizable point
// (a read index confirmed by a quorum, applied here), so the backup holds
// every write acknowledged before the request, then each session is read
// up to its last whole line, every line of which is committed.
func (c *Node) handleBackup(w http.ResponseWriter, r *http.Request) {
	created := time.Now().UTC()
	if !c.decodeSignedAt(w, r, "backup") {
		return
	}
	if err := c.readAll(r.Context()); err != nil {
		writeRefusal(w, err)
		return
	}
	h := backup.Header{Tally: c.cfg.Version, Created: created, Source: backup.Source{
		Kind: backup.SourceCluster, ClusterID: c.id.ClusterID, NodeID: c.cfg.NodeID, Groups: c.cfg.Groups,
	}}
	w.Header().Set("Content-Type", backup.MediaType)
	w.Header().Set("Trailer", BackupErrorTrailer)
	sw := &sentWriter{w: w}
	restores := c.sm.Restores()
	sum, err := backup.Take(r.Context(), sw, h, c.sm.Root(), backup.TailCut)
	if err == nil && c.sm.Restores() != restores {
		// A snapshot installed meanwhile replaced session logs as they were
		// read: one may have been read cut short or missed.
		err = errors.New("backup: this node installed a snapshot while the backup read its sessions; take the backup again (or through another node)")
	}
	switch {
	case err == nil:
		c.log.Info("backup streamed", "sessions", len(sum.Sessions), "objects", sum.Objects, "bytes", sum.Size)
	case !sw.sent:
		w.Header().Del("Trailer")
		w.Header().Del("Content-Type")
		writeRefusal(w, err)
	default:
		c.log.Error("backup failed after its first bytes", "err", err)
		w.Header().Set(BackupErrorTrailer, err.Error())
	}
}

// readAll waits until every data group is read-consistent here.
func (c *Node) readAll(ctx context.Context) error {
	for g := 0; g < c.cfg.Groups; g++ {
		if err := c.readIndex(ctx, node.MetaGroup+1+uint64(g)); err != nil {
			return err
		}
	}
	return nil
}

// sentWriter remembers whether anything reached the response.
type sentWriter struct {
	w    http.ResponseWriter
	sent bool
}

func (s *sentWriter) Write(p []byte) (int, error) {
	s.sent = s.sent || len(p) > 0
	return s.w.Write(p)
}
