// Package checkrun holds tally's runnable validators: the programs an
// evaluator runs on one materialised artifact to reach a verdict. Each
// returns a claim.Result and a log; `tally check run` stores the log as the
// evaluator's evidence artifact and records the verdict.
//
// Shipped validators:
//
//   - command: runs a shell command in the artifact's directory; exit 0 is
//     pass, any other exit fail, a command that cannot start (or a timeout)
//     error.
//   - test-report: reads `go test -json` output or JUnit XML; any failed test
//     is fail, no passed test incomplete, otherwise pass. Unreadable input is
//     error.
package checkrun

import (
	"context"
	"fmt"
	"sort"
	"time"

	"tally/claim"
)

// Input is what a validator is given.
type Input struct {
	// Dir is a private working directory holding the artifact.
	Dir string
	// Path is the artifact's file inside Dir.
	Path string
	// Command is a shell command: the command validator's program; for
	// test-report, a command whose standard output is the report (empty:
	// the artifact itself is the report).
	Command string
	// Timeout bounds a command (0: DefaultTimeout).
	Timeout time.Duration
	// Env is added to the command's environment (after TALLY_ARTIFACT).
	Env []string
}

// DefaultTimeout bounds a validator's command when Input.Timeout is zero.
const DefaultTimeout = 10 * time.Minute

// MaxLog bounds the log a validator keeps; the rest is cut with a note.
const MaxLog = 4 << 20

// Outcome is a validator's verdict.
type Outcome struct {
	Result claim.Result
	Note   string // one line: why
	Log    []byte // the evidence: what the validator saw
}

// Validator is one runnable definition, named as a check's validator.
type Validator interface {
	Name() string
	Version() string
	Run(ctx context.Context, in Input) Outcome
}

// shipped are the validators tally runs, in name order. A function, not a
// package variable: the set is fixed when tally is built.
func shipped() []Validator { return []Validator{Command{}, TestReport{}} }

// Lookup returns the validator named name.
func Lookup(name string) (Validator, bool) {
	for _, v := range shipped() {
		if v.Name() == name {
			return v, true
		}
	}
	return nil, false
}

// Names lists the shipped validators, sorted.
func Names() []string {
	var out []string
	for _, v := range shipped() {
		out = append(out, v.Name())
	}
	sort.Strings(out)
	return out
}

func errorf(log []byte, format string, a ...any) Outcome {
	note := fmt.Sprintf(format, a...)
	return Outcome{Result: claim.Error, Note: note, Log: append(log, []byte("tally: "+note+"\n")...)}
}
