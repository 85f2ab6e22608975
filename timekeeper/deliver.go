package timekeeper

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"sync"
	"time"

	"tally/expect"
)

// Sink delivers one notice. doc is one JSON object (no newline); key is the
// notice's idempotency key (a lapse id or a notice key), the same on every
// attempt. Deliver returns nil once the notice is delivered; an error means
// it may or may not have been, and the timekeeper tries again on a later sweep
// (at-least-once).
type Sink interface {
	Deliver(ctx context.Context, key string, doc []byte) error
	Name() string
}

// Notice is what a NoticeSink receives: the document every sink gets and
// what it is about.
type Notice struct {
	Key  string // the idempotency key: a lapse id or a notice key
	Kind string // KindLapse or KindNotice
	Doc  []byte // the document Deliver would get
	// For a lapse: the lapse, its expectation, and where the raising agent
	// takes its lapses over A2A (push token included; nil when the
	// expectation was raised without one).
	Lapse       *expect.LapseView
	Expectation *ExpectationBrief
	ReplyTo     *expect.ReplyTo
}

// NoticeSink is a Sink that wants the notice, not only its document: the
// timekeeper calls DeliverNotice instead of Deliver, with the same contract.
type NoticeSink interface {
	Sink
	DeliverNotice(ctx context.Context, n Notice) error
}

// Lines writes each notice as one JSON line to W: the default sink.
type Lines struct {
	mu sync.Mutex
	W  io.Writer
}

func (s *Lines) Name() string { return "stdout" }

func (s *Lines) Deliver(_ context.Context, _ string, doc []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := make([]byte, 0, len(doc)+1)
	b = append(append(b, doc...), '\n')
	_, err := s.W.Write(b)
	return err
}

// Exec runs `sh -c Command` per notice with the notice on stdin and
// TALLY_NOTICE_KEY in the environment; exit 0 is delivered.
type Exec struct {
	Command string
	Timeout time.Duration // per run; zero means 30s
	Env     []string      // the environment (nil: the process's)
	Stderr  io.Writer     // where the command's output goes (nil: discarded)
}

func (s *Exec) Name() string { return "exec" }

func (s *Exec) Deliver(ctx context.Context, key string, doc []byte) error {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", s.Command)
	cmd.Stdin = bytes.NewReader(append(append([]byte(nil), doc...), '\n'))
	cmd.Env = append(append([]string(nil), s.Env...), "TALLY_NOTICE_KEY="+key)
	if s.Env == nil {
		cmd.Env = append(cmd.Environ(), "TALLY_NOTICE_KEY="+key)
	}
	cmd.Stdout, cmd.Stderr = s.Stderr, s.Stderr
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("exec %q: %w", s.Command, err)
	}
	return nil
}

// Webhook POSTs each notice as JSON to URL with the header Idempotency-Key,
// retrying with exponential backoff: attempt n waits Backoff·2^(n-1), capped
// at BackoffMax, for at most Attempts attempts. A 2xx answer is delivered.
type Webhook struct {
	URL        string
	Client     *http.Client // nil: a client with a 10s timeout
	Attempts   int          // at least 1; zero means 5
	Backoff    time.Duration
	BackoffMax time.Duration
	// Sleep waits between attempts (tests replace it); nil sleeps on a timer.
	Sleep func(ctx context.Context, d time.Duration) error
}

// IdempotencyHeader is the header carrying a notice's key.
const IdempotencyHeader = "Idempotency-Key"

func (s *Webhook) Name() string { return "webhook" }

func (s *Webhook) Deliver(ctx context.Context, key string, doc []byte) error {
	client := s.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	p := poster{client: client, attempts: s.Attempts, backoff: s.Backoff, ceiling: s.BackoffMax, sleep: s.Sleep}
	return p.post(ctx, "webhook "+s.URL, s.URL, http.Header{IdempotencyHeader: {key}}, doc, nil)
}
