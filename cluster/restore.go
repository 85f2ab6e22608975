package cluster

// A cluster restored from a backup is a new incarnation: tally restore
// writes the backup's sessions into a new node's data directory with a
// restore.json naming a new cluster id; the node's first start bootstraps
// that cluster (Start's bootstrap, the one a --bootstrap node takes) with
// each data group's initial state being its restored sessions, so a node
// that joins later installs them by snapshot. Nodes of the backed-up
// cluster carry its id and are refused by the transport and the join.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"tally/backup"
	"tally/cluster/node"
	"tally/cluster/replica"
	"tally/store"
)

// restoreName is the file a restored backup awaits its node's first start
// in, beside cluster.json. Part of the data directory's format: do not
// rename.
const restoreName = "restore.json"

// Restored says which backup a cluster incarnation was restored from.
type Restored struct {
	// Source is what the backup was taken of: "cluster" (ClusterID) or
	// "ledger" (a ledger directory).
	Source    string `json:"source"`
	ClusterID string `json:"cluster_id,omitempty"`
	// Created is when the backup began: writes acknowledged to the old
	// authority after it may be missing here.
	Created  time.Time `json:"created"`
	Digest   string    `json:"digest"` // the backup file's
	Sessions int       `json:"sessions"`
}

// pendingRestore is restore.json: the node tally restore made, which its
// first start bootstraps.
type pendingRestore struct {
	ClusterID string         `json:"cluster_id"` // the new incarnation's
	Member    replica.Member `json:"member"`     // as tally restore was told; the first start's defaults
	Groups    int            `json:"groups"`
	From      Restored       `json:"from"`
}

// RestoreConfig is the first node of a restored cluster.
type RestoreConfig struct {
	Data   string         // its data directory: new, or empty
	Member replica.Member // its id and, if known, its addresses and zone
	Groups int            // the new cluster's data groups
}

// Restore writes the backup r reads into cfg.Data as the first node of a
// new cluster: the sessions and objects into its ledger directory, every
// byte verified as it is written, and restore.json with a new cluster id.
// It returns that id. The caller gives it an empty directory and removes
// what it wrote if it fails (Restore stops where it finds damage).
func Restore(ctx context.Context, r io.Reader, cfg RestoreConfig) (string, backup.Summary, error) {
	switch {
	case cfg.Member.ID == 0:
		return "", backup.Summary{}, errors.New("node-id: required, not 0")
	case cfg.Groups < 1 || cfg.Groups > MaxGroups:
		return "", backup.Summary{}, fmt.Errorf("groups: %d: must be 1 to %d", cfg.Groups, MaxGroups)
	}
	sum, err := backup.Restore(ctx, r, filepath.Join(cfg.Data, "ledger"))
	if err != nil {
		return "", backup.Summary{}, err
	}
	id, err := newClusterID()
	if err != nil {
		return "", backup.Summary{}, err
	}
	h := sum.Header
	pr := pendingRestore{ClusterID: id, Member: cfg.Member, Groups: cfg.Groups, From: Restored{
		Source: h.Source.Kind, ClusterID: h.Source.ClusterID, Created: h.Created, Digest: hex.EncodeToString(sum.Digest[:]), Sessions: len(sum.Sessions),
	}}
	if err := writeJSONFile(filepath.Join(cfg.Data, restoreName), pr); err != nil {
		return "", backup.Summary{}, err
	}
	if pg := restoredGroups(cfg.Groups, sum); pg.Groups > cfg.Groups || len(pg.Placed) > 0 {
		if err := writeJSONFile(filepath.Join(cfg.Data, restoreGroupsName), pg); err != nil {
			return "", backup.Summary{}, err
		}
	}
	return id, sum, nil
}

// restoreGroupsName is the file a restored backup's data groups wait in
// until its node has made them again: the groups added after the backed-up
// cluster's bootstrap, and the sessions a placement or a move had put in
// another group than their name's hash. Part of the data directory's
// format: do not rename.
const restoreGroupsName = "restore-groups.json"

// pendingGroups is restore-groups.json.
type pendingGroups struct {
	// Groups is the data groups the restored cluster is to have, the
	// added ones included.
	Groups int `json:"groups"`
	// Placed are the sessions to move to their backed-up group
	// (tenant/session → group).
	Placed map[string]uint64 `json:"placed,omitempty"`
}

// restoredGroups is what a backup asks of the data groups of a cluster
// restored from it with groups data groups at its bootstrap.
func restoredGroups(groups int, sum backup.Summary) pendingGroups {
	src := sum.Header.Source
	pg := pendingGroups{Groups: min(max(groups, src.Groups+src.Added), replica.MaxDataGroups), Placed: map[string]uint64{}}
	for _, c := range sum.Sessions {
		if c.Group != 0 && c.Group <= node.MetaGroup+uint64(pg.Groups) && c.Group != replica.GroupOf(groups, c.Tenant, c.Session) {
			pg.Placed[c.Name()] = c.Group
		}
	}
	return pg
}

// restoreGroupsEvery is how often a restored node's meta leader takes the
// next step of making its backup's groups again; restoreMovesAtOnce bounds
// the moves it has in progress.
const (
	restoreGroupsEvery = 500 * time.Millisecond
	restoreMovesAtOnce = 4
)

// restoreGroups makes a restored backup's data groups again, while this
// node leads the meta group: the added groups recorded (groups.add), then
// each placed session moved to its group by an ordinary move, a few at a
// time. Every step is committed, so a restart goes on from what the meta
// group records; the file goes once nothing is left.
func (c *Node) restoreGroups(ctx context.Context) {
	path := filepath.Join(c.cfg.Data, restoreGroupsName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	var pg pendingGroups
	if err == nil {
		err = json.Unmarshal(b, &pg)
	}
	if err != nil {
		c.log.Error("restore: the backup's data groups are not made again", "file", path, "err", err)
		return
	}
	c.whileMetaLeader(ctx, restoreGroupsEvery, func() bool {
		left, err := c.restoreGroupsStep(ctx, pg)
		if err != nil {
			c.log.Debug("restore: groups: no step this pass", "err", err)
			return false
		}
		if left > 0 {
			return false
		}
		if err := os.Remove(path); err != nil {
			c.log.Error("restore: groups made again, the file stays", "err", err)
		}
		c.log.Info("restore: the backup's data groups made again", "groups", pg.Groups, "sessions_moved", len(pg.Placed))
		return true
	}, nil)
}

// restoreGroupsStep takes the next steps toward pg, and returns how many
// sessions are not in their group yet.
func (c *Node) restoreGroupsStep(ctx context.Context, pg pendingGroups) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.readIndex(ctx, node.MetaGroup); err != nil {
		return 0, err
	}
	if have := c.sm.DataGroups(); have < pg.Groups {
		n := min(pg.Groups-have, replica.GroupsAddMax)
		add := replica.GroupsAdd{First: node.MetaGroup + 1 + uint64(have), Voters: c.newGroupsVoters(n)}
		if _, err := c.proposeMeta(ctx, replica.MetaCommand{Op: replica.OpGroupsAdd, GroupsAdd: &add, TS: time.Now().UnixNano()}); err != nil {
			return 0, err
		}
		c.log.Info("restore: data groups added again", "first", add.First, "count", n)
		return len(pg.Placed), nil
	}
	pol := c.sm.Policy()
	moving := 0
	for _, mv := range c.sm.Moves() {
		if !mv.Ended() {
			moving++
		}
	}
	left := 0
	for _, name := range slices.Sorted(maps.Keys(pg.Placed)) {
		g := pg.Placed[name]
		tenant, session, _ := strings.Cut(name, "/")
		if c.sm.GroupOf(tenant, session) == g {
			continue
		}
		left++
		if _, ok := pol.Groups[g]; (!ok && g > node.MetaGroup+uint64(c.cfg.Groups)) || moving >= restoreMovesAtOnce || slices.ContainsFunc(c.sm.Moves(), func(mv replica.Move) bool { return mv.Name() == name && !mv.Ended() }) {
			continue // an added group that has not recorded its configuration yet, or enough moves under way
		}
		if _, err := c.Move(ctx, tenant, session, g, false); err != nil {
			c.log.Debug("restore: session not moved to its group yet", "session", name, "group", g, "err", err)
			continue
		}
		moving++
	}
	return left, nil
}

// PendingMember is the member tally restore recorded in data, when data
// holds a restored backup its first start has not bootstrapped yet.
func PendingMember(data string) (replica.Member, bool, error) {
	pr, ok, err := readPendingRestore(data)
	return pr.Member, ok, err
}

func readPendingRestore(data string) (pendingRestore, bool, error) {
	path := filepath.Join(data, restoreName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return pendingRestore{}, false, nil
	}
	var pr pendingRestore
	if err == nil {
		err = json.Unmarshal(b, &pr)
	}
	if err == nil && (pr.ClusterID == "" || pr.Member.ID == 0 || pr.Groups < 1) {
		err = errors.New("cluster_id, member.id and groups are required")
	}
	if err != nil {
		return pendingRestore{}, false, fmt.Errorf("%s: %w", path, err)
	}
	return pr, true, nil
}

// restoredIdentity is the identity of a node whose data holds a pending
// restore: the new cluster's first node.
func restoredIdentity(cfg Config, pr pendingRestore) (identity, error) {
	if cfg.NodeID != pr.Member.ID {
		return identity{}, fmt.Errorf("node-id: %d, but %s holds a backup restored as node %d of the new cluster %s", cfg.NodeID, cfg.Data, pr.Member.ID, pr.ClusterID)
	}
	from := pr.From
	return identity{ClusterID: pr.ClusterID, NodeID: cfg.NodeID, Groups: pr.Groups, Restored: &from, Replicas: cfg.Replicas}, nil
}

// restoreDone removes restore.json once every group has its initial
// state: the next start is a restart.
func restoreDone(data string) error {
	if err := os.Remove(filepath.Join(data, restoreName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return store.SyncDir(data)
}

func newClusterID() (string, error) {
	var r [16]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(r[:]), nil
}

// writeJSONFile writes v to path whole or not at all, durably.
func writeJSONFile(path string, v any) error {
	enc, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(enc, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Open(tmp)
	if err == nil {
		err = f.Sync()
		f.Close()
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = store.SyncDir(filepath.Dir(path))
	}
	return err
}
