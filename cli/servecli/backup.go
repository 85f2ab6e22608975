package servecli

// tally backup, tally backup verify and tally restore: a backup file
// (package backup, docs/BACKUP.md) of a ledger directory or of a whole
// cluster through any node, checked without restoring it, and restored
// into a new ledger directory or as the first node of a new cluster.

import (
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"tally/api"
	"tally/backup"
	"tally/cli"
	"tally/cluster"
	"tally/cluster/replica"
	"tally/store"
)

type backupOptions struct {
	to, node, secret string
}

func newBackup(g cli.Env) *cobra.Command {
	o := &backupOptions{}
	c := &cobra.Command{
		Use:   "backup --to FILE [--dir D | --node ADDR]",
		Short: cli.HostedShort("backup"),
		Long: `backup writes one file holding every session's log up to a cut, the cut's sequence and chain
hash, the artifact bytes the sessions name, and a digest of it all (docs/BACKUP.md). Every write
acknowledged before the backup began is in it.

With --dir (or TALLY_DIR, or the nearest .tally/) it reads a ledger directory, and does so while
other processes write it, tally serve included: each session is cut at its last durable line,
holding writers up for no more than a stat. With --node ADDR (or TALLY_URL) it asks a cluster
node, which reads every group at a linearizable point and streams the whole cluster; the request
is signed with the join secret (--join-secret or TALLY_JOIN_SECRET).

The file is written beside FILE and renamed to it once read back and verified; an existing FILE
is never replaced. --to - writes to standard output (the summary then goes to standard error).`,
		Example: `  tally backup --to ledger.backup --dir /var/lib/tally
  TALLY_JOIN_SECRET="$SECRET" tally backup --to cluster.backup --node 10.0.0.2:7420
  tally backup verify cluster.backup`,
		// A word after backup can only be a verb (verify), as for a group.
		Args: cli.UnknownVerb,
		// TALLY_URL names the node to back up, so it is not refused here.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE: func(c *cobra.Command, _ []string) error {
			if c.Flags().NFlag() == 0 {
				return c.Help() // alone, like a command group
			}
			return runBackup(g, c.Context(), o)
		},
	}
	c.SuggestionsMinimumDistance = 2
	f := c.Flags()
	f.StringVar(&o.to, "to", "", "the file to write, which must not exist (- for standard output)")
	f.StringVar(&o.node, "node", "", "a cluster node's --addr: back up the whole cluster through it (default, when TALLY_URL is set and no ledger directory is named: $TALLY_URL)")
	f.StringVar(&o.secret, "join-secret", "", "with --node: the cluster's join secret, which signs the request (default: $TALLY_JOIN_SECRET)")
	c.AddCommand(&cobra.Command{
		Use:     "verify FILE",
		Short:   "Check a backup file without restoring it: every session's chain up to its cut, every artifact's digest, the file's digest; print what it holds",
		Example: "  tally backup verify cluster.backup --json",
		Args:    cobra.ExactArgs(1),
		RunE:    func(c *cobra.Command, args []string) error { return runBackupVerify(g, args[0]) },
	})
	return c
}

func runBackup(g cli.Env, ctx context.Context, o *backupOptions) error {
	if o.to == "" {
		return cli.Usagef("to: required: the file to write the backup to (- for standard output)")
	}
	node := o.node
	if node != "" && g.Dir() != "" {
		return cli.Usagef("dir, node: give one: --dir backs up a ledger directory, --node a cluster")
	}
	if node == "" && g.Dir() == "" && g.IO().Getenv("TALLY_DIR") == "" {
		node = g.RemoteURL()
	}
	var secret, root string
	var err error
	if node != "" {
		secret, err = joinSecret(g, o.secret)
	} else {
		root, err = g.LedgerRoot()
	}
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	out, err := createBackupFile(g, o.to)
	if err != nil {
		return err
	}
	defer out.discard()
	var sum backup.Summary
	if node == "" {
		h := backup.Header{Tally: cli.Version, Created: g.IO().Now(), Source: backup.Source{Kind: backup.SourceLedger}}
		if st, serr := store.ReadSettings(root); serr != nil {
			return serr
		} else if st != (store.Settings{}) {
			h.Settings = &st
		}
		sum, err = backup.Take(ctx, out.w, h, root, backup.SettledCut)
	} else {
		sum, err = fetchBackup(g, ctx, node, secret, out.w)
	}
	if err != nil {
		return err
	}
	if err := out.keep(sum); err != nil {
		return err
	}
	w := g.IO().Out
	if o.to == "-" {
		w = g.IO().Err
	}
	return printBackup(g, w, o.to, "", sum)
}

// fetchBackup asks a cluster node for the whole cluster's backup and
// writes it to w, verifying it as it comes.
func fetchBackup(g cli.Env, ctx context.Context, node, secret string, w io.Writer) (backup.Summary, error) {
	url := nodeURL(g, node)
	to, err := cluster.ReadTarget(ctx, url)
	if err != nil {
		return backup.Summary{}, fmt.Errorf("backup: %w; back up a tally serve ledger with `tally backup --dir` on its directory, which is safe while it runs", err)
	}
	body, _ := json.Marshal(cluster.SignBackup(secret, to, g.IO().Now()))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+cluster.BackupPath, strings.NewReader(string(body)))
	if err != nil {
		return backup.Summary{}, cli.Usagef("node: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return backup.Summary{}, fmt.Errorf("backup: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var ref struct{ Error, Code string }
		_ = json.Unmarshal(raw, &ref)
		switch {
		case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed:
			return backup.Summary{}, fmt.Errorf("backup: %s is not a cluster node (it answers %s to %s); back up a tally serve ledger with `tally backup --dir` on its directory, which is safe while it runs", url, resp.Status, cluster.BackupPath)
		case ref.Error == "":
			return backup.Summary{}, fmt.Errorf("backup: %s answered %s: %s", url, resp.Status, strings.TrimSpace(string(raw)))
		case resp.StatusCode == http.StatusBadRequest:
			return backup.Summary{}, cli.Usagef("%s", ref.Error)
		}
		return backup.Summary{}, errors.New(ref.Error)
	}
	sum, err := backup.Verify(io.TeeReader(resp.Body, w))
	// Why the node stopped is in the trailer, after the body: a cut file's
	// reason, or the refusal of a whole one (a snapshot installed while
	// the node read it).
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if why := resp.Trailer.Get(cluster.BackupErrorTrailer); why != "" {
		return backup.Summary{}, fmt.Errorf("backup: %s stopped the backup: %s", url, why)
	}
	if err != nil {
		return backup.Summary{}, fmt.Errorf("backup from %s: %w", url, err)
	}
	return sum, nil
}

// backupFile is where a backup is written: a file beside the one named,
// renamed to it once verified, or standard output.
type backupFile struct {
	w    io.Writer
	tmp  *os.File // nil for standard output
	path string
}

func createBackupFile(g cli.Env, name string) (*backupFile, error) {
	if name == "-" {
		return &backupFile{w: g.IO().Out}, nil
	}
	path := g.Abs(name)
	if _, err := os.Lstat(path); err == nil {
		return nil, fmt.Errorf("to: %s exists: a backup never replaces a file; name another", name)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".partial-*")
	if err != nil {
		return nil, fmt.Errorf("to: %w", err)
	}
	return &backupFile{w: tmp, tmp: tmp, path: path}, nil
}

// keep makes the file durable, reads it back and verifies it is the backup
// written, and gives it its name.
func (b *backupFile) keep(wrote backup.Summary) error {
	if b.tmp == nil {
		return nil
	}
	if err := b.tmp.Sync(); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	read, err := backup.Verify(io.NewSectionReader(b.tmp, 0, wrote.Size))
	if err == nil && (read.Digest != wrote.Digest || read.Size != wrote.Size) {
		err = errors.New("the file read back is not the backup written")
	}
	if err != nil {
		return fmt.Errorf("backup: reading %s back: %w", b.tmp.Name(), err)
	}
	if err := b.tmp.Close(); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if _, err := os.Lstat(b.path); err == nil {
		return fmt.Errorf("to: %s appeared while the backup was written: a backup never replaces a file", b.path)
	}
	if err := os.Rename(b.tmp.Name(), b.path); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	b.tmp = nil
	return store.SyncDir(filepath.Dir(b.path))
}

// discard removes the file unless it was kept.
func (b *backupFile) discard() {
	if b.tmp != nil {
		b.tmp.Close()
		os.Remove(b.tmp.Name())
	}
}

func runBackupVerify(g cli.Env, name string) error {
	f, err := os.Open(g.Abs(name))
	if err != nil {
		return fmt.Errorf("backup verify: %w", err)
	}
	defer f.Close()
	sum, err := backup.Verify(f)
	if err != nil {
		return fmt.Errorf("backup verify %s: %w", name, err)
	}
	return printBackup(g, g.IO().Out, name, "", sum)
}

type restoreOptions struct {
	data                 string
	nodeID               uint64
	raftAddr, addr, zone string
	groups               int
}

func newRestore(g cli.Env) *cobra.Command {
	o := &restoreOptions{}
	c := &cobra.Command{
		Use:   "restore FILE (--dir D | --data D [--node-id N] [--raft-addr HOST:PORT] [--addr HOST:PORT] [--zone Z] [--groups G])",
		Short: cli.HostedShort("restore"),
		Long: `restore verifies the whole file first and writes nothing from a damaged one. D must not exist
or be empty.

--dir D makes D a ledger directory holding the backup's sessions and artifacts.

--data D makes D the data directory of the first node of a NEW cluster, with a new cluster id:
a new incarnation, not the cluster the backup was taken of, whose nodes it refuses. Start it
with tally serve --cluster --data D --join-secret S (the node id, addresses and zone given here
are its defaults); its first start bootstraps the new cluster with the restored sessions, and
other nodes then join it with --join. Writes acknowledged after the backup's instant, which
restore prints, are not in it.`,
		Example: `  tally restore ledger.backup --dir /var/lib/tally-restored
  tally restore cluster.backup --data /var/lib/tally --node-id 1 --raft-addr 10.0.0.1:7421 --addr 10.0.0.1:7420
  tally serve --cluster --data /var/lib/tally --join-secret "$SECRET"`,
		Args:              cobra.ExactArgs(1),
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE:              func(c *cobra.Command, args []string) error { return runRestore(g, c, args[0], o) },
	}
	f := c.Flags()
	f.StringVar(&o.data, "data", "", "restore as the first node of a new cluster, into this data directory")
	f.Uint64Var(&o.nodeID, "node-id", 1, "with --data: the node's id in the new cluster")
	f.StringVar(&o.raftAddr, "raft-addr", "", "with --data: HOST:PORT its peers will reach it on (its first start's default)")
	f.StringVar(&o.addr, "addr", "", "with --data: its API address (its first start's default)")
	f.StringVar(&o.zone, "zone", "", "with --data: its failure zone (its first start's default)")
	f.IntVar(&o.groups, "groups", 0, "with --data: the new cluster's data groups (default: the backed-up cluster's, else 8)")
	return c
}

func runRestore(g cli.Env, c *cobra.Command, file string, o *restoreOptions) error {
	switch {
	case file == "-":
		return cli.Usagef("FILE: a file, not standard input: restore reads it twice (verified, then written)")
	case (g.Dir() == "") == (o.data == ""):
		return cli.Usagef("dir, data: give one: --dir restores a ledger directory, --data the first node of a new cluster")
	case o.data == "" && (c.Flags().Changed("node-id") || o.raftAddr != "" || o.addr != "" || o.zone != "" || o.groups != 0):
		return cli.Usagef("node-id, raft-addr, addr, zone, groups: only with --data")
	case o.nodeID == 0:
		return cli.Usagef("node-id: must not be 0")
	case o.groups < 0 || o.groups > cluster.MaxGroups:
		return cli.Usagef("groups: %d: must be 1 to %d", o.groups, cluster.MaxGroups)
	}
	target, field := g.Dir(), "dir"
	if o.data != "" {
		target, field = o.data, "data"
	}
	target = g.Abs(target)
	ctx, stop := signal.NotifyContext(c.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	f, err := os.Open(g.Abs(file))
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer f.Close()
	if err := mustBeNew(field, target); err != nil {
		return err
	}
	// The whole file first: nothing is written from a damaged one.
	checked, err := backup.Verify(f)
	if err != nil {
		return fmt.Errorf("restore %s: %w", file, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	var sum backup.Summary
	var clusterID string
	err = writeNew(target, func() error {
		var err error
		if o.data == "" {
			sum, err = backup.Restore(ctx, f, target)
		} else {
			groups := o.groups
			if groups == 0 {
				groups = cmp.Or(checked.Header.Source.Groups, cluster.DefaultGroups)
			}
			m := replica.Member{ID: o.nodeID, RaftAddr: o.raftAddr, Addr: o.addr, Zone: o.zone}
			clusterID, sum, err = cluster.Restore(ctx, f, cluster.RestoreConfig{Data: target, Member: m, Groups: groups})
		}
		if err == nil && sum.Digest != checked.Digest {
			err = fmt.Errorf("%s changed while it was restored", file)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("restore %s: %w", file, err)
	}
	if o.data == "" {
		return printBackup(g, g.IO().Out, file, target, sum)
	}
	return printRestoredCluster(g, target, file, clusterID, sum)
}

// mustBeNew refuses a target that exists and is not an empty directory.
func mustBeNew(field, dir string) error {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("%s: %w", field, err)
	case len(ents) > 0:
		return fmt.Errorf("%s: %s is not empty: a backup is restored into a new directory, never over one", field, dir)
	}
	return nil
}

// writeNew runs write, which fills dir (new, or empty), and leaves dir as
// it found it if write fails.
func writeNew(dir string, write func() error) error {
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	err := write()
	if err == nil {
		return nil
	}
	if errors.Is(statErr, os.ErrNotExist) {
		os.RemoveAll(dir)
		return err
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
	return err
}

// printBackup prints what a backup holds: written (file), verified, or
// restored into a ledger directory (into).
func printBackup(g cli.Env, w io.Writer, file, into string, sum backup.Summary) error {
	if g.JSON() {
		ms := backupMembers(file, sum)
		if into != "" {
			ms = append(ms, api.M("restored_into", api.S(into)))
		}
		_, err := w.Write(api.Doc(ms...))
		return err
	}
	verb := "holds"
	if into != "" {
		verb = "restored to"
	}
	printSummary(w, sum, verb)
	switch {
	case into != "":
		fmt.Fprintf(w, "restored into the ledger directory %s\n", into)
	case file != "-":
		fmt.Fprintf(w, "%s: a whole backup\n", file)
	}
	return nil
}

// printRestoredCluster prints a restore as the first node of a new
// cluster: what the backup held, the new cluster, and how to start it.
func printRestoredCluster(g cli.Env, data, file, clusterID string, sum backup.Summary) error {
	m, _, err := cluster.PendingMember(data)
	if err != nil {
		return err
	}
	if g.JSON() {
		ms := append(backupMembers(file, sum), api.M("restored_into", api.S(data)),
			api.M("cluster_id", api.S(clusterID)), api.M("node_id", api.U(m.ID)))
		_, err := g.IO().Out.Write(api.Doc(ms...))
		return err
	}
	w := g.IO().Out
	printSummary(w, sum, "restored to")
	fmt.Fprintf(w, "new cluster %s, node %d, in %s: a new incarnation", clusterID, m.ID, data)
	if old := sum.Header.Source.ClusterID; old != "" {
		fmt.Fprintf(w, ", not cluster %s, whose nodes it refuses", old)
	}
	fmt.Fprintf(w, "; writes acknowledged after %s are not in it\n", sum.Header.Created.Format(time.RFC3339Nano))
	start := "start it: tally serve --cluster --data " + data + ` --join-secret "$TALLY_JOIN_SECRET"`
	if m.RaftAddr == "" {
		start += " --raft-addr HOST:PORT"
	}
	if m.Addr == "" {
		start += " --addr HOST:PORT"
	}
	fmt.Fprintln(w, start)
	return nil
}

// printSummary prints a backup's source and instant, each session's cut
// and the totals.
func printSummary(w io.Writer, sum backup.Summary, verb string) {
	h := sum.Header
	fmt.Fprintf(w, "%s, taken %s by tally %s\n", describeSource(h.Source), h.Created.Format(time.RFC3339Nano), h.Tally)
	t := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range sum.Sessions {
		fmt.Fprintf(t, "  %s\t%s seq %d\tchain %x\n", c.Name(), verb, c.Seq, c.Hash[:8])
	}
	t.Flush()
	fmt.Fprintf(w, "%d session(s), %d artifact(s) of %d bytes; %d bytes, digest %x\n", len(sum.Sessions), sum.Objects, sum.ObjectBytes, sum.Size, sum.Digest)
}

func describeSource(s backup.Source) string {
	if s.Kind == backup.SourceCluster {
		return fmt.Sprintf("backup of cluster %s (%d groups) through node %d", s.ClusterID, s.Groups, s.NodeID)
	}
	return "backup of a ledger directory"
}

// backupMembers is a backup's summary as --json prints it.
func backupMembers(file string, sum backup.Summary) []api.Member {
	h := sum.Header
	src, _ := json.Marshal(h.Source)
	list := []byte{'['}
	for i, c := range sum.Sessions {
		if i > 0 {
			list = append(list, ',')
		}
		list = fmt.Appendf(list, `{"session":%s,"seq":%d,"hash":"%x","bytes":%d}`, api.S(c.Name()), c.Seq, c.Hash, c.Bytes)
	}
	list = append(list, ']')
	return []api.Member{
		api.M("file", api.S(file)), api.M("format", []byte(strconv.Itoa(h.Format))), api.M("tally", api.S(h.Tally)),
		api.M("created", api.S(h.Created.Format(time.RFC3339Nano))), api.M("source", src), api.M("sessions", list),
		api.M("objects", []byte(strconv.Itoa(sum.Objects))), api.M("object_bytes", []byte(strconv.FormatInt(sum.ObjectBytes, 10))),
		api.M("bytes", []byte(strconv.FormatInt(sum.Size, 10))), api.M("digest", api.S(hex.EncodeToString(sum.Digest[:]))),
	}
}
