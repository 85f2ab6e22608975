package cluster

// Bytes through a node (an artifact's, a verdict's evidence): the proposer
// streams them into the session's group as Stage commands of at most
// UploadChunkSize bytes each, carried raw beside the command's JSON, each
// committed before the next is read; then it proposes the command that uses
// them, naming the upload with the size and content digest it read. Every
// replica stages each chunk in a file named by the upload, and on the final
// command checks its staged bytes against that size and digest while the
// Service stores them in its content store (replica.OpenUpload). A reply
// thus means a quorum has the bytes on disk, and every replica holds them.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"tally/cluster/replica"
	"tally/digest"
	"tally/service"
)

// UploadChunkSize is the bytes one Stage command carries: with its
// envelope, well under a node's entry bound (node.Config.MaxEntrySize,
// 1 MiB), so a chunk is never refused for its size.
const UploadChunkSize = 512 << 10

// MaxUploadSize bounds the bytes of one artifact or evidence sent to a
// node; past it the write is refused (413).
const MaxUploadSize = replica.MaxUploadSize

// MaxUploadBytes is MaxUploadSize: the server bounds the byte routes' bodies
// by it, refusing one declared past it before a byte is staged.
func (c *Node) MaxUploadBytes() int64 { return MaxUploadSize }

// A command whose repetition is harmless (a chunk: its offset says what is
// staged; a command under a request id: its record answers) is proposed
// again while its group is unavailable here (a leader changing, none yet),
// up to retryAttemptsMax times, retryPause apart: the bytes of a stream
// already read cannot be sent again by the client.
const (
	retryAttemptsMax = 40
	retryPause       = 250 * time.Millisecond
)

// WithUpload is the command document of a write that uses an upload: the
// method's own document and the upload's name, size and content. Exported
// for the simulator, which proposes such writes as a node does.
type WithUpload[D any] struct {
	Doc    D              `json:"doc"`
	Upload replica.Upload `json:"upload"`
}

// writeBytes stages body in the session's group, then proposes the command
// of method name with d and the upload, and returns what applying it here
// returned.
func writeBytes[D, R any](ctx context.Context, c *Node, name string, call service.Call, d D, body io.Reader) (R, error) {
	up, err := c.upload(ctx, call, body)
	if err != nil {
		var zero R
		return zero, err
	}
	propose := c.propose
	if call.RequestID != "" {
		propose = c.proposeAgain
	}
	return commit[WithUpload[D], R](ctx, c, name, call, WithUpload[D]{Doc: d, Upload: up}, propose)
}

// bytesMethod is how a replica runs a write that uses an upload: open the
// staged bytes, checked as they are read, and call the Service with them.
func bytesMethod[D, R any](sm func() *replica.SM, f func(service.Service, context.Context, service.Call, D, io.Reader) (R, error)) replica.Method {
	return method(func(s service.Service, ctx context.Context, call service.Call, d WithUpload[D]) (R, error) {
		body, err := sm().OpenUpload(call, d.Upload)
		if err != nil {
			var zero R
			return zero, err
		}
		defer body.Close()
		return f(s, ctx, call, d.Doc, body)
	})
}

// upload stages body in call's session's group, chunk by chunk, and names
// what it staged. Past MaxUploadSize it is refused; what it staged by then,
// or by any other failure, is abandoned at once (unstage). The first chunk follows the
// session to its placement (route.go); the others go where it went.
func (c *Node) upload(ctx context.Context, call service.Call, body io.Reader) (up replica.Upload, err error) {
	group := uint64(0)
	up = replica.Upload{ID: replica.NewUploadID(time.Now(), seed())}
	defer func() {
		if err != nil && group != 0 {
			c.unstage(group, call, up.ID)
		}
	}()
	h := digest.NewContentHasher()
	buf := make([]byte, UploadChunkSize)
	for {
		n, err := io.ReadFull(body, buf)
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return up, fmt.Errorf("read the bytes: %w", err)
		}
		if n > 0 {
			if up.Size+int64(n) > MaxUploadSize {
				return up, replica.TooLarge("body")
			}
			if err := c.stage(ctx, &group, call, up.ID, up.Size, buf[:n]); err != nil {
				return up, err
			}
			h.Write(buf[:n])
			up.Size += int64(n)
		}
		if err != nil {
			break // the end of the bytes
		}
	}
	up.Content = digest.ContentSum(h).String()
	return up, nil
}

// stage commits one chunk of upload id at offset in *group, or, when it is
// 0, in the session's group, which it sets.
func (c *Node) stage(ctx context.Context, group *uint64, call service.Call, id string, offset int64, chunk []byte) error {
	cmd, err := NewCommand(replica.MethodStage, service.Call{Tenant: call.Tenant, Session: call.Session},
		replica.StageDoc{Upload: id, Offset: offset}, time.Now(), seed())
	if err != nil {
		return err
	}
	cmd.Payload = chunk
	data, err := cmd.Encode()
	if err != nil {
		return err
	}
	propose := func(g uint64) (replica.Outcome, error) { return c.proposeAgain(ctx, g, data) }
	if *group != 0 {
		out, err := propose(*group)
		if err != nil {
			return staged(err)
		}
		return out.Err
	}
	out, g, err := c.routed(ctx, call.Tenant, call.Session, propose)
	if err != nil {
		return staged(err)
	}
	*group = g
	return out.Err
}

// unstageWithin bounds the proposal that abandons an upload whose bytes
// did not all arrive; past it the upload is abandoned by its age
// (replica.UploadMaxAge).
const unstageWithin = 10 * time.Second

// unstage abandons upload id in group at once, so that its staged bytes
// are removed on every replica now rather than after UploadMaxAge: the
// write that would have used it failed (its bytes went past the limit or
// stopped coming, a chunk was refused). It runs on its own context: the
// request's may be what ended.
func (c *Node) unstage(group uint64, call service.Call, id string) {
	ctx, cancel := context.WithTimeout(c.ctx, unstageWithin)
	defer cancel()
	cmd, err := NewCommand(replica.MethodUnstage, service.Call{Tenant: call.Tenant, Session: call.Session},
		replica.StageDoc{Upload: id}, time.Now(), seed())
	var data []byte
	if err == nil {
		data, err = cmd.Encode()
	}
	if err == nil {
		var out replica.Outcome
		out, err = c.proposeAgain(ctx, group, data)
		err = errors.Join(err, out.Err)
	}
	if err != nil {
		c.log.Warn("cluster: abandon an upload; it goes after replica.UploadMaxAge instead", "group", group, "upload", id, "err", err)
	}
}

// staged is a chunk's failure as the write's answer: whatever became of
// the chunk, the write that would use it was never proposed.
func staged(err error) error {
	var u *Unavailable
	if errors.As(err, &u) && u.OutcomeUnknown {
		known := *u
		known.OutcomeUnknown = false
		return &known
	}
	return err
}

// proposeAgain is propose, repeated while the group is unavailable here,
// for a command whose repetition is harmless.
func (c *Node) proposeAgain(ctx context.Context, group uint64, data []byte) (replica.Outcome, error) {
	for attempt := 1; ; attempt++ {
		out, err := c.propose(ctx, group, data)
		var u *Unavailable
		if !errors.As(err, &u) || attempt == retryAttemptsMax {
			return out, err
		}
		c.log.Debug("cluster: proposing again", "group", group, "attempt", attempt, "err", err)
		select {
		case <-time.After(retryPause):
		case <-ctx.Done():
			return out, err
		case <-c.ctx.Done():
			return out, err
		}
	}
}
