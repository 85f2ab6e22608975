package servecli

// tally cluster move TENANT/SESSION --group G [--abort] and tally cluster
// moves: a session's move to another data group, through a node, signed
// with the join secret.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"tally/cli"
	"tally/cluster"
	"tally/cluster/replica"
)

// moveAttempts bounds the sends of one move request a node answers 503.
const moveAttempts = 5

// moveOptions are tally cluster move's.
type moveOptions struct {
	addr    *string
	secret  func() (string, error)
	session string // TENANT/SESSION
	group   uint64
	abort   bool
	wait    time.Duration
}

func newClusterMove(g cli.Env, addr *string, secret func() (string, error)) *cobra.Command {
	o := &moveOptions{addr: addr, secret: secret}
	c := &cobra.Command{
		Use:   "move TENANT/SESSION --group G | --abort",
		Short: "Move a session with its records to another data group (copied, fenced for a moment, proven, activated), or abort its move before activation",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.session = args[0]
			return runMove(c.Context(), g, o)
		},
	}
	c.Flags().Uint64Var(&o.group, "group", 0, "the data group to move the session to (see tally cluster groups)")
	c.Flags().BoolVar(&o.abort, "abort", false, "abort the session's move in progress: it stays in its group, unfenced")
	c.Flags().DurationVar(&o.wait, "wait", 2*time.Minute, "how long to wait for the move to be activated or aborted (0: do not wait)")
	return c
}

func runMove(ctx context.Context, g cli.Env, o *moveOptions) error {
	tenant, session, err := splitSession(o.session)
	if err != nil {
		return err
	}
	switch {
	case o.abort && o.group != 0:
		return cli.Usagef("group: --abort takes no group: it aborts the session's move in progress")
	case !o.abort && o.group == 0:
		return cli.Usagef("group: required: the data group to move the session to (see tally cluster groups)")
	case o.wait < 0:
		return cli.Usagef("wait: must not be negative")
	}
	s, err := o.secret()
	if err != nil {
		return err
	}
	body := func(t cluster.Target) any {
		return cluster.Sign(s, t, cluster.MoveRequest{Tenant: tenant, Session: session, Group: o.group, Abort: o.abort})
	}
	// A move's request is decided once (a begin again answers the move
	// begun, an abort again the abort), so a node that could not take it
	// now is asked again, a few times.
	var raw []byte
	for attempt := 1; ; attempt++ {
		raw, err = clusterCall(g, ctx, *o.addr, cluster.MovePath, body)
		var ue unavailableError
		if err == nil || !errors.As(err, &ue) || attempt == moveAttempts {
			break
		}
		select {
		case <-time.After(time.Duration(attempt) * 500 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err != nil {
		return err
	}
	var mv replica.Move
	if err := json.Unmarshal(raw, &mv); err != nil {
		return fmt.Errorf("move: the node's answer: %w", err)
	}
	if o.wait > 0 && !o.abort {
		if mv, err = waitMove(ctx, g, o, s, mv); err != nil {
			return err
		}
		raw, _ = json.Marshal(mv)
		raw = append(raw, '\n')
	}
	if g.JSON() {
		_, err := g.IO().Out.Write(raw)
		return err
	}
	w := g.IO().Out
	switch {
	case mv.Step == replica.MoveAborted:
		fmt.Fprintf(w, "move %d of %s aborted (%s): it stays in group %d\n", mv.ID, mv.Name(), mv.Reason, mv.From)
	case mv.Step == replica.MoveActivated || mv.Step == replica.MoveRetired:
		fmt.Fprintf(w, "%s moved from group %d to group %d (move %d, epoch %d): %d records, fenced %s\n", mv.Name(), mv.From, mv.To, mv.ID, mv.Epoch+1, mv.Seq, time.Duration(mv.Activated-mv.Fenced).Round(time.Millisecond))
	default:
		fmt.Fprintf(w, "move %d of %s from group %d to group %d: %s (tally cluster moves follows it)\n", mv.ID, mv.Name(), mv.From, mv.To, mv.Step)
	}
	if mv.Step == replica.MoveAborted && !o.abort {
		return fmt.Errorf("move %d of %s was aborted: %s", mv.ID, mv.Name(), mv.Reason)
	}
	return nil
}

// waitMove polls the moves until mv is activated or aborted, or o.wait
// passes.
func waitMove(ctx context.Context, g cli.Env, o *moveOptions, secret string, mv replica.Move) (replica.Move, error) {
	deadline := time.Now().Add(o.wait)
	for {
		raw, err := clusterCall(g, ctx, *o.addr, cluster.MovesPath, func(t cluster.Target) any { return cluster.SignMoves(secret, t, g.IO().Now()) })
		var ue unavailableError
		if err != nil && !errors.As(err, &ue) {
			return mv, err
		}
		var doc cluster.Moves
		if err == nil {
			if err := json.Unmarshal(raw, &doc); err != nil {
				return mv, fmt.Errorf("moves: the node's answer: %w", err)
			}
		}
		for _, m := range doc.Moves {
			if m.ID == mv.ID {
				mv = m
			}
		}
		if mv.Step == replica.MoveActivated || mv.Step == replica.MoveRetired || mv.Step == replica.MoveAborted {
			return mv, nil
		}
		if time.Now().After(deadline) {
			return mv, fmt.Errorf("move %d of %s is still %s after %s: tally cluster moves follows it", mv.ID, mv.Name(), mv.Step, o.wait)
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return mv, ctx.Err()
		}
	}
}

func newClusterMoves(g cli.Env, addr *string, secret func() (string, error)) *cobra.Command {
	return &cobra.Command{
		Use:   "moves",
		Short: "The session moves in progress and the recent ones: step, bytes copied, outcome (signed with the join secret)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			s, err := secret()
			if err != nil {
				return err
			}
			return clusterPrint(g, c.Context(), *addr, cluster.MovesPath, func(t cluster.Target) any { return cluster.SignMoves(s, t, g.IO().Now()) }, func(raw []byte) error {
				var doc cluster.Moves
				if err := json.Unmarshal(raw, &doc); err != nil {
					return fmt.Errorf("moves: the node's answer: %w", err)
				}
				return printMoves(g.IO().Out, doc.Moves)
			})
		},
	}
}

func printMoves(w io.Writer, mvs []replica.Move) error {
	if len(mvs) == 0 {
		_, err := fmt.Fprintln(w, "no moves")
		return err
	}
	t := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(t, "MOVE\tSESSION\tFROM\tTO\tSTEP\tBYTES\tRECORDS\tFENCED\tREASON")
	for _, mv := range mvs {
		fenced := "-"
		if mv.Activated > 0 {
			fenced = time.Duration(mv.Activated - mv.Fenced).Round(time.Millisecond).String()
		}
		step := mv.Step
		if mv.Step == replica.MoveAborted && !mv.Unwound {
			step += " (unwinding)"
		}
		fmt.Fprintf(t, "%d\t%s\t%d\t%d\t%s\t%d\t%d\t%s\t%s\n", mv.ID, mv.Name(), mv.From, mv.To, step, max(mv.Bytes, mv.Length), mv.Seq, fenced, mv.Reason)
	}
	return t.Flush()
}
