package cli

// A local write given --request-id is idempotent as a server write given
// Idempotency-Key is (ledger.Idempotency): the id is bound to what the
// command line asked and the answer the write printed is recorded in the
// same fsync as its records, so an exact retry prints that answer again,
// byte for byte, and appends nothing; the same id with another command is
// refused (IdempotencyConflict), and an id older than the ledger's
// request_history is never run again (RequestHistoryExpired).
//
// The verbs that run through the Service (the promise family) leave this
// to it: the id is bound to the method and its api document, the response
// document is what is recorded, and the text is printed from it, as over
// TALLY_URL. The verbs below still write a ledger themselves.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/zeebo/blake3"

	"tally/ledger"
	"tally/rule"
)

// requestIDMax bounds a request id, as the server bounds Idempotency-Key.
const requestIDMax = 256

// answerFunc prints a write's answer from the state the write left and the
// records it appended, through g (its streams and output mode).
type answerFunc func(g *global, st *ledger.State, res []ledger.Result) error

// recordedAnswer is what a local write with a request id records as its
// response: its stdout in both output modes, and its warnings for stderr,
// so a retry with or without --json prints what the first run printed.
type recordedAnswer struct {
	Text string `json:"text"`
	JSON string `json:"json"`
	Warn string `json:"warn,omitempty"`
}

// stdinDigest hashes what a command reads from stdin, which is part of
// what a request asked.
type stdinDigest struct {
	r io.Reader
	h *blake3.Hasher
}

func (d *stdinDigest) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	d.h.Write(p[:n])
	return n, err
}

// asks reports whether a flag changes what a request asks: the output
// mode, the request id itself, and where and as whom it runs (an id is kept
// per acting identity) do not.
func asks(flag string) bool {
	switch flag {
	case "json", "request-id", "dir", "session", "as":
		return false
	}
	return true
}

// requestDigest binds a request id to what the command line asked: the
// verb, its arguments, the flags given, the bytes read from stdin, and
// extra (the content of a file the verb publishes).
func (g *global) requestDigest(c *cobra.Command, extra []byte) [32]byte {
	h := blake3.NewDeriveKey("tally 2026-12 cli request digest v1")
	fmt.Fprintf(h, "%s\n", c.CommandPath())
	for _, a := range c.Flags().Args() {
		fmt.Fprintf(h, "arg %d:%s\n", len(a), a)
	}
	c.Flags().Visit(func(f *pflag.Flag) { // in name order
		if asks(f.Name) {
			v := f.Value.String()
			fmt.Fprintf(h, "flag %s %d:%s\n", f.Name, len(v), v)
		}
	})
	if g.stdin != nil {
		fmt.Fprintf(h, "stdin %x\n", g.stdin.h.Sum(nil))
	}
	fmt.Fprintf(h, "extra %d:", len(extra))
	h.Write(extra)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// write runs cmd on l as actor and prints its answer; with a request id,
// idempotently (see the top of this file).
func (g *global) write(c *cobra.Command, l *ledger.Ledger, cmd ledger.Command, actor, requestID string, extra []byte, answer answerFunc) ([]ledger.Result, error) {
	opts := ledger.WriteOptions{Actor: actor, RequestID: requestID}
	if requestID == "" {
		res, _, _, err := l.Execute(c.Context(), cmd, opts, nil)
		if err != nil {
			return nil, err
		}
		l.Read(func(st *ledger.State) { err = answer(g, st, res) })
		return res, err
	}
	if len(requestID) > requestIDMax {
		return nil, rule.Invalidf("request-id", fmt.Sprintf("at most %d bytes", requestIDMax))
	}
	idem := &ledger.Idempotency{Principal: actor, Key: requestID, Digest: g.requestDigest(c, extra),
		Render: func(st *ledger.State, res []ledger.Result) []byte { return g.recordAnswer(st, res, answer) }}
	res, resp, _, err := l.Execute(c.Context(), cmd, opts, idem)
	if err != nil {
		return nil, err
	}
	return res, g.printRecorded(resp)
}

// recordAnswer renders answer in both output modes, without colour, as the
// response a request id keeps.
func (g *global) recordAnswer(st *ledger.State, res []ledger.Result, answer answerFunc) []byte {
	var a recordedAnswer
	for _, asJSON := range []bool{false, true} {
		var out, warn bytes.Buffer
		r := *g
		r.io.Out, r.io.Err, r.io.Terminal, r.json = &out, &warn, false, asJSON
		if err := answer(&r, st, res); err != nil {
			fmt.Fprintf(&warn, "warning: %v\n", err)
		}
		if asJSON {
			a.JSON = out.String()
		} else {
			a.Text, a.Warn = out.String(), warn.String()
		}
	}
	b, err := json.Marshal(a)
	if err != nil {
		panic("cli: a recorded answer does not encode: " + err.Error())
	}
	return b
}

// printRecorded prints a recorded answer in the output mode asked for now.
func (g *global) printRecorded(resp []byte) error {
	var a recordedAnswer
	if err := json.Unmarshal(resp, &a); err != nil {
		return fmt.Errorf("request id: the answer recorded for it is not a tally CLI answer (was the id used over HTTP?): %w", err)
	}
	if g.json {
		_, err := io.WriteString(g.io.Out, a.JSON)
		return err
	}
	if a.Warn != "" {
		io.WriteString(g.io.Err, a.Warn)
	}
	_, err := io.WriteString(g.io.Out, a.Text)
	return err
}
