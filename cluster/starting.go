package cluster

// A node that cannot start yet because of its disk (full, failing) is
// started again and again, further apart each time, while its HTTP
// address answers health and status with why it has not started: an
// operator, a load balancer and a probe see the reason, rather than a
// port that does not answer.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"tally/api"
	"tally/rest"
)

// StartFreeMin is the space a node's data directory's file system must
// have free for the node to start: its raft store first flushes what its
// log holds.
const StartFreeMin = 16 << 20

// The waits between a node's starts: the first, and the most.
const (
	startWaitMin = time.Second
	startWaitMax = 15 * time.Second
)

// CodeNodeStarting answers every request to a node that has not started
// yet (HTTP 503, with why and Retry-After).
const CodeNodeStarting = "NodeStarting"

// Starting is a node on its way up: Run starts it, again after a disk
// error, and Refusal answers meanwhile.
type Starting struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	why      error     // the last start's failure, or the store's last error while it opens
	attempts int       // starts tried
	next     time.Time // when the next start is tried (zero: one is under way)
}

// NewStarting is cfg's node, not started yet.
func NewStarting(cfg Config) *Starting {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Starting{cfg: cfg, log: cfg.Logger.With("node", cfg.NodeID)}
	s.cfg.storeErrors = func(err error) {
		s.mu.Lock()
		s.why = fmt.Errorf("opening the raft store: %w", err)
		s.mu.Unlock()
	}
	return s
}

// Run starts the node, and starts it again after a disk error (no space,
// an I/O error), waiting from startWaitMin to startWaitMax between starts;
// any other error, or ctx's end, is returned.
func (s *Starting) Run(ctx context.Context) (*Node, error) {
	for attempt := 1; ; attempt++ {
		s.mu.Lock()
		s.attempts, s.next = attempt, time.Time{}
		s.mu.Unlock()
		n, err := s.start(ctx)
		if err == nil || !diskError(err) || ctx.Err() != nil {
			return n, err
		}
		wait := min(startWaitMin<<min(attempt-1, 10), startWaitMax)
		s.mu.Lock()
		s.why, s.next = err, time.Now().Add(wait)
		s.mu.Unlock()
		// Logged at the first failure and then at each doubling of the
		// count, not at every retry.
		if attempt&(attempt-1) == 0 {
			s.log.Error("node cannot start; retrying", "err", err, "attempts", attempt, "retry_in", wait.String())
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// start runs Start, and returns at ctx's end even if Start has not (its
// raft store may not open before the disk is fixed); a node that starts
// after that is closed.
func (s *Starting) start(ctx context.Context) (*Node, error) {
	type started struct {
		n   *Node
		err error
	}
	done := make(chan started, 1)
	go func() {
		n, err := Start(ctx, s.cfg)
		done <- started{n, err}
	}()
	select {
	case r := <-done:
		return r.n, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.n != nil {
				r.n.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// diskError is a start that failed on the node's disk, which an operator
// may fix without restarting it.
func diskError(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EIO) || errors.Is(err, syscall.EROFS)
}

// Refusal is the answer to every request while the node has not
// started: 503 NodeStarting, why, how many starts it tried, and when it
// tries again (Retry-After). tally serve --cluster answers it
// (rest.WriteRefusal) until the node is up.
func (s *Starting) Refusal() *rest.Refusal {
	s.mu.Lock()
	why, attempts, next := s.why, s.attempts, s.next
	s.mu.Unlock()
	msg := fmt.Sprintf("node %d has not started yet", s.cfg.NodeID)
	if why != nil {
		msg = fmt.Sprintf("node %d cannot start: %v", s.cfg.NodeID, why)
	}
	retry := 1
	if !next.IsZero() {
		retry = max(1, int(time.Until(next).Round(time.Second)/time.Second))
	}
	r := rest.NewRetryable(CodeNodeStarting, msg, api.M("node_id", api.U(s.cfg.NodeID)), api.M("attempts", api.U(uint64(attempts))))
	r.RetryAfter = time.Duration(retry) * time.Second
	return r
}
