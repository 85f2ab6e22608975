package ledger

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"tally/claim"
	"tally/expect"
	"tally/instant"
	"tally/jsonline"
	"tally/promise"
	"tally/service"
	"tally/store"
)

// TypeRequest is the record that binds a request id to the command it
// carried and the response it got. It is appended in the same transaction as
// the records the request produced, so a retry after a crash either finds it
// (and gets the same response) or finds nothing was done. Stored: do not rename.
const TypeRequest = "tally.request"

// Idempotency makes a write safe to retry: the key (principal, request id)
// is bound to the command's digest, and the response Render produces on the
// first execution is recorded and returned, byte for byte, to every retry.
type Idempotency struct {
	Principal string
	Key       string
	Digest    [32]byte
	// Render makes the response from the state and the records just
	// appended. It runs under the session lock; it must be quick and must
	// not keep references to st.
	Render func(st *State, res []Result) []byte
}

type requestEntry struct {
	digest   [32]byte
	response []byte
	at       int64 // the first execution's ts, packed (instant.Pack)
}

func requestKey(principal, key string) string { return principal + "\x00" + key }

// Command is one command of any family, for Execute.
type Command struct {
	Promise promise.Command
	Claim   claim.Command
	Expect  expect.Command
	Human   bool // the actor is a person (expectations past the lineage bound)
}

// Execute runs cmd as opts.Actor. With idem set, it is idempotent: a retry
// with the same key and digest returns the recorded response and replayed
// true, appending nothing. The recorded response is Render's output with
// surrounding whitespace removed (it is stored inside one log line).
func (l *Ledger) Execute(ctx context.Context, cmd Command, opts WriteOptions, idem *Idempotency) (res []Result, response []byte, replayed bool, err error) {
	req := &request{opts: opts, idem: idem}
	switch {
	case cmd.Promise != nil:
		c := cmd.Promise
		if idem == nil {
			// Everything that does not depend on the state (the checks,
			// the record, its encoding) is done here, outside the session
			// lock; only Admit runs under it. A declaration without an id
			// gets one here too, and another under the lock in the rare
			// case it is taken. (An idempotent request is decided whole
			// under the lock, where its key is checked first.)
			pp := &req.prepared
			var err error
			if d, ok := c.(promise.Declare); ok {
				if d.ID == "" {
					d.ID, pp.mint = l.spread(), true
				}
				pp.p, err = promise.PrepareDeclare(l.cfg.Limits, opts.Actor, l.cfg.Now(), d)
			} else {
				pp.p, err = promise.Prepare(l.cfg.Limits, opts.Actor, l.cfg.Now(), c)
			}
			if err != nil {
				l.pipe.CountRefused(1)
				return nil, nil, false, err
			}
			pp.pend[0] = promisePending(pp.p.Event) // decide stays nil: Admit decides it
			break
		}
		req.decide = func(st *State, now time.Time) ([]pending, []string, error) {
			if d, ok := c.(promise.Declare); ok && d.ID == "" {
				for {
					d.ID = l.mintID()
					if _, taken := st.Promises.Get(d.ID); !taken {
						break
					}
				}
				c = d
			}
			return decideWith(l.promiseFamily(st), input(opts, false, now), c, keepPromise)
		}
	case cmd.Claim != nil:
		req.decide = func(st *State, now time.Time) ([]pending, []string, error) {
			return decideWith(claimFamily(st), input(opts, false, now), cmd.Claim, nil)
		}
	case cmd.Expect != nil:
		req.decide = func(st *State, now time.Time) ([]pending, []string, error) {
			return decideWith(expectFamily(st), input(opts, cmd.Human, now), cmd.Expect, nil)
		}
	default:
		return nil, nil, false, errors.New("execute: empty command")
	}
	res, err = l.submit(ctx, req)
	return res, req.response, req.replayed, err
}

// checkIdempotency looks the request up before it is decided. It reports
// whether the request is settled (replayed or refused) without deciding.
func (l *Ledger) checkIdempotency(r *request, now time.Time) bool {
	if r.idem == nil {
		return false
	}
	var ok bool
	r.response, ok, r.err = l.st.recorded(r.idem, now, l.cfg.IdempotencyWindow)
	r.replayed = ok && r.err == nil
	return ok
}

// Recorded looks a request up without executing anything: the response
// recorded for idem's key and digest, or the refusal a retry would get,
// and whether the key is recorded at all. A caller whose request has side
// effects outside the ledger (running a validator) asks first, so a retry
// repeats none of them.
func (l *Ledger) Recorded(idem *Idempotency) (response []byte, ok bool, err error) {
	l.pipe.Read(func(store.Position) {
		response, ok, err = l.st.recorded(idem, l.cfg.Now(), l.cfg.IdempotencyWindow)
	})
	return response, ok, err
}

// recorded is the one rule for a request id already used: older than
// window, expired; another digest, a conflict; else the recorded response.
func (s *State) recorded(idem *Idempotency, now time.Time, window time.Duration) ([]byte, bool, error) {
	e, ok := s.requests[requestKey(idem.Principal, idem.Key)]
	switch {
	case !ok:
		return nil, false, nil
	case now.Sub(instant.Unpack(e.at)) > window: // Sub saturates where a difference of nanoseconds would wrap
		return nil, true, &service.IdempotencyError{Code: service.CodeRequestHistoryExpired, Key: idem.Key}
	case e.digest != idem.Digest:
		return nil, true, &service.IdempotencyError{Code: service.CodeIdempotencyConflict, Key: idem.Key}
	}
	return e.response, true, nil
}

// requestRecord encodes the tally.request record for an executed request.
func requestRecord(now time.Time, idem *Idempotency, n int, response []byte) []byte {
	b := make([]byte, 0, 128+len(response))
	b = append(b, `{"ts":`...)
	b = jsonline.AppendString(b, instant.Format(now.UTC().Truncate(time.Second)))
	b = append(b, `,"type":"`+TypeRequest+`","principal":`...)
	b = jsonline.AppendString(b, idem.Principal)
	b = append(b, `,"key":`...)
	b = jsonline.AppendString(b, idem.Key)
	b = append(b, `,"digest":"`...)
	b = hex.AppendEncode(b, idem.Digest[:])
	b = append(b, `","records":`...)
	b = fmt.Appendf(b, "%d", n)
	b = append(b, `,"response":`...)
	b = append(b, response...)
	return append(b, '}')
}

// applyRequest folds a tally.request record into the request table.
func (s *State) applyRequest(e store.Entry) error {
	var principal, key string
	var digest [32]byte
	var response []byte
	var at time.Time
	err := jsonline.Object(e.Line, func(k, v []byte) error {
		var err error
		switch string(k) {
		case "ts":
			var t string
			if t, err = jsonline.String(v); err == nil {
				at, err = time.Parse(time.RFC3339Nano, t)
			}
		case "principal":
			principal, err = jsonline.String(v)
		case "key":
			key, err = jsonline.String(v)
		case "digest":
			var h string
			if h, err = jsonline.String(v); err == nil {
				var d []byte
				if d, err = hex.DecodeString(h); err == nil && len(d) == 32 {
					copy(digest[:], d)
				} else if err == nil {
					err = errors.New("digest is not 32 bytes")
				}
			}
		case "response":
			response = append([]byte(nil), v...)
		}
		return err
	})
	if err != nil {
		return err
	}
	if s.requests == nil {
		s.requests = map[string]*requestEntry{}
	}
	k := requestKey(principal, key)
	if _, dup := s.requests[k]; !dup {
		s.requests[k] = &requestEntry{digest: digest, response: response, at: instant.Pack(at)}
	}
	return nil
}
