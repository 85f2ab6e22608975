package timekeeper

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"tally/internal/tick"
)

// poster POSTs JSON documents for the HTTP sinks (Webhook, A2A): each
// delivery tried at most attempts times with exponential backoff, every
// request on one client (whose timeout and dialer, for A2A the HostPolicy,
// bound where and how long it may go).
type poster struct {
	client *http.Client
	// attempts (zero: 5), backoff (zero: 500 ms) doubled up to ceiling
	// (zero: 30 s), waited with sleep (nil: a timer): see retry.
	attempts         int
	backoff, ceiling time.Duration
	sleep            func(context.Context, time.Duration) error
	// final reports an error not worth another attempt (nil: none is).
	final func(error) bool
}

// post POSTs body to url with hdr, retried: what names it in the error.
// accept judges the answer (nil: any 2xx); the body is read at most
// 64 KiB unless accept reads it.
func (p poster) post(ctx context.Context, what, url string, hdr http.Header, body []byte, accept func(*http.Response) error) error {
	return p.retry(ctx, what, func() error { return p.once(ctx, url, hdr, body, accept) })
}

// once makes one POST of body to url with hdr and Content-Type
// application/json, judged by accept (nil: a 2xx answer, its body drained).
func (p poster) once(ctx context.Context, url string, hdr http.Header, body []byte, accept func(*http.Response) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, vs := range hdr {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if accept != nil {
		return accept(resp)
	}
	drain(resp)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("answered %s", resp.Status)
	}
	return nil
}

// drain reads what is left of an answer, up to 64 KiB, so that the
// connection can be used again.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
}

// retry runs try until it succeeds, at most p.attempts times, waiting
// p.backoff before each retry, doubled each time up to p.ceiling. An error
// p.final reports, or one after ctx ended, is not retried. Errors name
// what.
func (p poster) retry(ctx context.Context, what string, try func() error) error {
	attempts, backoff, ceiling, sleep := p.attempts, p.backoff, p.ceiling, p.sleep
	if attempts <= 0 {
		attempts = 5
	}
	if backoff <= 0 {
		backoff = 500 * time.Millisecond
	}
	if ceiling <= 0 {
		ceiling = 30 * time.Second
	}
	if sleep == nil {
		sleep = tick.Sleep
	}
	var last error
	for n := 1; n <= attempts; n++ {
		if n > 1 {
			if err := sleep(ctx, backoff); err != nil {
				return fmt.Errorf("%s: %w (last: %v)", what, err, last)
			}
			backoff = min(backoff*2, ceiling)
		}
		if last = try(); last == nil {
			return nil
		}
		if (p.final != nil && p.final(last)) || ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, last)
		}
	}
	return fmt.Errorf("%s: %d attempts: %w", what, attempts, last)
}
