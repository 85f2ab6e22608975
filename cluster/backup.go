package cluster

import (
	"context"
	"errors"
	"io"
	"time"

	"tally/backup"
	"tally/cluster/node"
	"tally/cluster/replica"
)

// BackupPath is the route a node streams a backup of the whole cluster
// from: an operator's request signed with the join secret, as
// transfer-leader and remove-node are.
const BackupPath = "/v1/cluster/backup"

// BackupErrorTrailer is backup.ErrorTrailer: why a backup stopped after
// its first bytes.
const BackupErrorTrailer = backup.ErrorTrailer

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

// OpBackup writes to w a backup of every session of the cluster from
// this node's replica: every data group is first read at a linearizable
// point (a read index confirmed by a quorum, applied here), so the backup
// holds every write acknowledged before the request, then each session is
// read up to its last whole line, every line of which is committed. The
// server answers a failure before the first byte as a refusal, and one
// after it in backup.ErrorTrailer.
func (c *Node) OpBackup(ctx context.Context, decode Decode, w io.Writer) error {
	created := time.Now().UTC()
	if err := c.decodeSigned(decode, &SignedAt{what: "backup"}); err != nil {
		return err
	}
	if err := c.readAll(ctx); err != nil {
		return refusal(err)
	}
	h := backup.Header{Tally: c.cfg.Version, Created: created, Source: backup.Source{
		Kind: backup.SourceCluster, ClusterID: c.id.ClusterID, NodeID: c.cfg.NodeID, Groups: c.cfg.Groups,
		Added: c.sm.DataGroups() - c.cfg.Groups,
	}}
	sw := &sentWriter{w: w}
	restores := c.sm.Restores()
	sum, err := backup.TakeGrouped(ctx, sw, h, c.sm.Root(), backup.TailCut, c.backupGroup)
	if err == nil && c.sm.Restores() != restores {
		// A snapshot installed meanwhile replaced session logs as they were
		// read: one may have been read cut short or missed.
		err = errors.New("backup: this node installed a snapshot while the backup read its sessions; take the backup again (or through another node)")
	}
	switch {
	case err == nil:
		c.log.Info("backup streamed", "sessions", len(sum.Sessions), "objects", sum.Objects, "bytes", sum.Size)
	case !sw.sent:
		return refusal(err)
	default:
		c.log.Error("backup failed after its first bytes", "err", err)
	}
	return err
}

// backupGroup is a session's group in a backup: the directory's, when a
// placement or a move put it elsewhere than its name's hash.
func (c *Node) backupGroup(tenant, session string) uint64 {
	if g := c.sm.GroupOf(tenant, session); g != replica.GroupOf(c.cfg.Groups, tenant, session) {
		return g
	}
	return 0
}

// readAll waits until every data group, the added ones too, is
// read-consistent here.
func (c *Node) readAll(ctx context.Context) error {
	for g := 0; g < c.sm.DataGroups(); g++ {
		if err := c.readIndex(ctx, node.MetaGroup+1+uint64(g)); err != nil {
			return err
		}
	}
	return nil
}

// sentWriter remembers whether anything reached the response.
type sentWriter struct {
	w    io.Writer
	sent bool
}

func (s *sentWriter) Write(p []byte) (int, error) {
	s.sent = s.sent || len(p) > 0
	return s.w.Write(p)
}
