package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"tally/ledger"
	"tally/ledgerservice"
	"tally/service"
	"tally/store"
	"tally/timekeeper"
)

type watchOptions struct {
	once               bool
	every              time.Duration
	now                string
	execCmd            string
	webhook            string
	webhookAttempts    int
	webhookBackoff     time.Duration
	reminders          []time.Duration
	escalate           time.Duration
	stdout             bool
	dryRun             bool
	sweepMax, claimMax int
}

func newWatch(g *global) *cobra.Command {
	o := &watchOptions{}
	c := &cobra.Command{
		Use:   "watch (--once | --every INTERVAL)",
		Short: "Keep time: commit lapses, withdrawals and claim deadline facts as the timekeeper; send promise notices",
		Long: `tally watch is the timekeeper. Each sweep commits, exactly once, every expectation lapse and
withdrawal due and every passed claim deadline, and walks each overdue promise's escalation
ladder (the debtor at the deadline, again at each reminder, then the creditor) without
appending anything for promises. Lapses and notices are delivered as JSON lines on stdout
(default), to --exec (the notice on stdin of sh -c CMD) and/or to --webhook (HTTP POST,
retried, with an Idempotency-Key header). Deliveries are journaled in the session's
watch/journal.jsonl, so a restart does not send them again.

--now sets the watcher's clock; an instant later than this process's clock by more than 5s
is refused (exit 2): a timekeeper records only what has happened, and the log keeps what it
records for good. --dry-run (with --once) sweeps a copy of the session instead, at any
instant: it prints each record it would append and each notice it would deliver as JSON
lines on stdout, and records, journals and sends nothing.`,
		Example: `  tally watch --once
  tally watch --every 10s --webhook https://ops.example.org/tally --exec 'logger -t tally'
  tally watch --once --dry-run --now 2026-12-07T00:00:00Z`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error { return g.runWatch(c.Context(), o) },
	}
	f := c.Flags()
	f.BoolVar(&o.once, "once", false, "sweep once and exit")
	f.DurationVar(&o.every, "every", 0, "sweep at this interval until SIGINT or SIGTERM (default 10s)")
	f.StringVar(&o.now, "now", "", "start the watcher's clock at this RFC 3339 time instead of the real one, at most 5s ahead of it (for tests and replays; with --every it runs on from there)")
	f.BoolVar(&o.dryRun, "dry-run", false, "with --once: print what the sweep would record and deliver, on a copy of the session; record and send nothing")
	f.StringVar(&o.execCmd, "exec", "", "deliver each lapse and notice as JSON on the stdin of `sh -c CMD` (exit 0: delivered)")
	f.StringVar(&o.webhook, "webhook", "", "deliver each lapse and notice by HTTP POST to URL, retried with exponential backoff")
	f.IntVar(&o.webhookAttempts, "webhook-attempts", 5, "attempts per webhook delivery in one sweep")
	f.DurationVar(&o.webhookBackoff, "webhook-backoff", 500*time.Millisecond, "first wait between webhook attempts (doubles, capped at 30s)")
	f.DurationSliceVar(&o.reminders, "reminders", timekeeper.DefaultConfig().Reminders, "the debtor's reminders after a promise's deadline")
	f.DurationVar(&o.escalate, "escalate", 0, "when after the deadline the creditor is told (default: at the last reminder)")
	f.BoolVar(&o.stdout, "stdout", false, "also print JSON lines on stdout when --exec or --webhook is given")
	f.IntVar(&o.sweepMax, "sweep-max", 10_000, "records one ledger sweep commits")
	f.IntVar(&o.claimMax, "claim-max", 10_000, "claim deadline facts one sweep commits")
	c.MarkFlagsMutuallyExclusive("once", "every")
	return c
}

func (g *global) runWatch(ctx context.Context, o *watchOptions) error {
	if !o.once && o.every == 0 {
		o.every = 10 * time.Second
	}
	if o.every < 0 {
		return usagef("every: %v must be positive", o.every)
	}
	if o.webhookAttempts < 1 {
		return usagef("webhook-attempts: must be at least 1")
	}
	if o.dryRun && !o.once {
		return usagef("dry-run: only with --once")
	}
	clock := g.io.Now // the process's own, which --now may not pass
	if o.now != "" {
		start, err := parseNow(o.now, g.io.Now)
		if err != nil {
			return err
		}
		if !o.dryRun {
			if err := timekeeper.CheckNow(start, clock()); err != nil {
				return err
			}
		}
		// --once sweeps at exactly that instant; --every lets it run on.
		real := time.Now()
		g.io.Now = func() time.Time {
			if o.once {
				return start
			}
			return start.Add(time.Since(real))
		}
	}
	cfg := timekeeper.DefaultConfig()
	if !o.dryRun {
		cfg.Clock = clock
	}
	cfg.Reminders, cfg.Escalate = o.reminders, o.escalate
	cfg.SweepMax, cfg.ClaimMax = o.sweepMax, o.claimMax
	cfg.Logger = slog.New(&warnHandler{w: g.io.Err})
	if o.execCmd != "" {
		cfg.Sinks = append(cfg.Sinks, &timekeeper.Exec{Command: o.execCmd, Stderr: g.io.Err})
	}
	if o.webhook != "" {
		cfg.Sinks = append(cfg.Sinks, &timekeeper.Webhook{URL: o.webhook, Attempts: o.webhookAttempts, Backoff: o.webhookBackoff})
	}
	if len(cfg.Sinks) == 0 || o.stdout {
		cfg.Sinks = append([]timekeeper.Sink{&timekeeper.Lines{W: g.io.Out}}, cfg.Sinks...)
	}
	if o.dryRun {
		// Nothing leaves the process: the notices print, as records do.
		cfg.Sinks = []timekeeper.Sink{&timekeeper.Lines{W: g.io.Out}}
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	if o.dryRun {
		return g.dryRunWatch(ctx, cfg)
	}
	l, err := g.open()
	if err != nil {
		return err
	}
	defer l.Close()
	w, err := g.timekeeper(ctx, l, cfg)
	if err != nil {
		return err
	}
	defer w.Close()
	if o.once {
		rep, err := w.Sweep(ctx)
		g.reportSweep(rep, err, true)
		if err != nil {
			return err
		}
		if rep.Failed > 0 {
			return silentExit{}
		}
		return nil
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return w.Run(ctx, o.every, func(rep timekeeper.Report, err error) { g.reportSweep(rep, err, false) })
}

// timekeeper is the session's timekeeper over the Service on l, at the
// ledger's clock (this process's, or --now's).
func (g *global) timekeeper(ctx context.Context, l *ledger.Ledger, cfg timekeeper.Config) (*timekeeper.Timekeeper, error) {
	cfg.Now = l.Now
	svc := ledgerservice.OneSession(l, ledgerservice.Config{Timekeeper: l.Timekeeper()})
	tenant, session, _ := g.target() // g.open checked it
	return timekeeper.New(ctx, svc, service.Call{Tenant: tenant, Session: session}, cfg)
}

// reportSweep prints one sweep's summary on stderr (stdout carries the
// notices): always with --once, else only when it did something.
func (g *global) reportSweep(rep timekeeper.Report, err error, always bool) {
	if err != nil && !always {
		fmt.Fprintln(g.io.Err, "tally watch: "+err.Error())
	}
	busy := rep.Lapses+rep.Withdrawals+rep.ClaimFacts+rep.Delivered+rep.Failed+rep.Waiting > 0
	if !always && !busy {
		return
	}
	if g.json {
		_ = writeExpectDoc(g.io.Err, "sweep", rep)
		return
	}
	fmt.Fprintf(g.io.Err, "tally watch: %s: %d lapse(s), %d withdrawal(s), %d claim fact(s) committed; %d delivered, %d failed, %d waiting\n",
		rep.At.Format(time.RFC3339), rep.Lapses, rep.Withdrawals, rep.ClaimFacts, rep.Delivered, rep.Failed, rep.Waiting)
}

// dryRunWatch sweeps once on a copy of the session (its log, checkpoint
// and journal, in a temporary directory) and prints each record the sweep
// appended there, then each notice it delivered, as JSON lines: what a
// sweep at that instant would record and send, with nothing recorded,
// journaled or sent.
func (g *global) dryRunWatch(ctx context.Context, cfg timekeeper.Config) error {
	dir, err := g.sessionDir()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "tally-dry-run-*")
	if err != nil {
		return fmt.Errorf("dry run: %w", err)
	}
	defer os.RemoveAll(tmp)
	copyDir := filepath.Join(tmp, "session")
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		err = os.MkdirAll(copyDir, 0o755) // no log yet: an empty session
		if err != nil {
			return fmt.Errorf("dry run: %w", err)
		}
	} else if err := copyTree(dir, copyDir); err != nil {
		return fmt.Errorf("dry run: copy the session: %w", err)
	}
	l, err := g.openDir(copyDir)
	if err != nil {
		return err
	}
	defer l.Close()
	var from store.Position
	l.ReadAt(func(_ *ledger.State, pos store.Position) { from = pos })
	var notices bytes.Buffer
	cfg.Sinks = []timekeeper.Sink{&timekeeper.Lines{W: &notices}}
	w, err := g.timekeeper(ctx, l, cfg)
	if err != nil {
		return err
	}
	defer w.Close()
	rep, err := w.Sweep(ctx)
	if err != nil {
		return err
	}
	if _, _, err := l.Log().Scan(from, func(e store.Entry) error {
		_, err := fmt.Fprintf(g.io.Out, "%s\n", bytes.TrimRight(e.Line, "\n"))
		return err
	}); err != nil {
		return fmt.Errorf("dry run: read the copy: %w", err)
	}
	if _, err := g.io.Out.Write(notices.Bytes()); err != nil {
		return err
	}
	fmt.Fprintf(g.io.Err, "tally watch: dry run at %s: would commit %d lapse(s), %d withdrawal(s), %d claim fact(s) and deliver %d notice(s); nothing recorded\n",
		rep.At.UTC().Truncate(time.Second).Format(time.RFC3339), rep.Lapses, rep.Withdrawals, rep.ClaimFacts, rep.Delivered)
	return nil
}

// copyTree copies the regular files under src to dst (made), keeping the
// tree's shape.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case !d.Type().IsRegular():
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
}
