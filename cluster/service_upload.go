package cluster

// Bytes through a node (an artifact's, a verdict's evidence) travel beside
// the raft log, not in it. The node asked streams them into its own
// content store (hashed as they are written, fsynced, renamed into place:
// artifact.Store.Put), holding collections off until the write is
// decided; then it proposes the write's command naming the upload with the
// size and content digest it read and itself as the holder of a verified
// copy (replica.Upload.Holders). No byte enters the log. Each replica
// applying the command records the content as owed to it (replica
// content.go); every other node then fetches the bytes from a holder,
// verifies them whole and stores them before it commits its custody
// receipt (fetch.go, custody.go). A reply thus means the write is
// committed and one verified copy is durable; a check on the artifact
// begins once every voter has its receipt (CustodyPending).
//
// Commands of the earlier form, whose bytes were staged through the log
// chunk by chunk (replica.MethodStage), are still applied as they were, so
// that an old log replays the same.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"tally/api"
	"tally/artifact"
	"tally/cluster/replica"
	"tally/ledgerservice"
	"tally/rest"
	"tally/service"
	"tally/store"
)

// UploadChunkSize is the bytes one Stage command carried when bytes were
// staged through the log; kept for the commands of that form.
const UploadChunkSize = 512 << 10

// DefaultMaxUploadBytes is Config.MaxUploadBytes unless set: 1 GiB, a
// single server's bound too.
const DefaultMaxUploadBytes = 1 << 30

// MaxUploadSize is the bound of bytes staged through the log, in the
// commands of that earlier form.
const MaxUploadSize = replica.MaxUploadSize

// MaxUploadBytes bounds the bytes of one write sent to the node
// (Config.MaxUploadBytes): the server bounds the byte routes' bodies by
// it, refusing one declared past it before a byte is stored.
func (c *Node) MaxUploadBytes() int64 {
	if c.cfg.MaxUploadBytes > 0 {
		return c.cfg.MaxUploadBytes
	}
	return DefaultMaxUploadBytes
}

// A command whose repetition is harmless (a command under a request id:
// its record answers) is proposed again while its group is unavailable
// here (a leader changing, none yet), up to retryAttemptsMax times,
// retryPause apart: the bytes of a stream already read cannot be sent
// again by the client.
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

// writeBytes stores body in this node's content store, then proposes the
// command of method name with d and the upload, and returns what applying
// it here returned.
func writeBytes[D, R any](ctx context.Context, c *Node, name string, call service.Call, d D, body io.Reader) (R, error) {
	up, release, err := c.upload(ctx, body)
	defer release()
	if err != nil {
		var zero R
		return zero, err
	}
	propose := c.propose
	if call.RequestID != "" {
		propose = c.proposeAgain
	}
	r, err := commit[WithUpload[D], R](ctx, c, name, call, WithUpload[D]{Doc: d, Upload: up}, propose)
	if err == nil {
		c.custody.stored(up.Content, c.sm.PlacementEpoch(c.sm.GroupOf(call.Tenant, call.Session)))
		c.custody.wake()
	}
	return r, err
}

// bytesMethod is how a replica runs a write that uses an upload: open its
// bytes (declared, when they travel beside the log; staged and checked as
// they are read, in the earlier form), call the Service with them, and
// once it succeeded record the content the group now names.
func bytesMethod[D, R any](sm func() *replica.SM, f func(service.Service, context.Context, service.Call, D, io.Reader) (R, error)) replica.Method {
	return method(func(s service.Service, ctx context.Context, call service.Call, d WithUpload[D]) (R, error) {
		var zero R
		body, err := sm().OpenUpload(call, d.Upload)
		if err != nil {
			return zero, err
		}
		defer body.Close()
		r, err := f(s, ctx, call, d.Doc, body)
		if err != nil {
			return zero, err
		}
		if err := sm().UsedUpload(d.Upload); err != nil {
			return zero, err
		}
		return r, nil
	})
}

// upload streams body into this node's content store and names what it
// stored, with this node its holder. Past MaxUploadBytes it is refused
// and nothing of it is kept; a disk that fills is refused 507. release
// lets collections in again: the caller calls it once the write that
// names the bytes is decided (and it is set when upload fails).
func (c *Node) upload(ctx context.Context, body io.Reader) (up replica.Upload, release func(), err error) {
	release = func() {}
	objs, err := artifact.OpenStore(store.ObjectsDir(c.sm.Root()))
	if err != nil {
		return up, release, err
	}
	if release, err = objs.Hold(); err != nil {
		return up, func() {}, err
	}
	limit := c.MaxUploadBytes()
	content, size, err := ledgerservice.StoreBytes(ctx, objs, &boundedBody{r: body, left: limit, limit: limit})
	var ref *rest.Refusal
	if errors.As(err, &ref) && ref.Code == service.CodeInsufficientStorage {
		// Which node's disk filled: the client may send the bytes to another.
		err = rest.NewRefusalWith(http.StatusInsufficientStorage, service.CodeInsufficientStorage,
			fmt.Sprintf("node %d: %s", c.cfg.NodeID, ref.Message), api.M("node", api.U(c.cfg.NodeID)))
	}
	if err != nil {
		return up, release, err
	}
	up = replica.Upload{ID: replica.NewUploadID(time.Now(), seed()), Size: size, Content: content.String(), Holders: []uint64{c.cfg.NodeID}}
	return up, release, nil
}

// boundedBody reads a write's bytes up to limit, and refuses one more.
type boundedBody struct {
	r           io.Reader
	left, limit int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1] // one byte past the limit tells it is passed
	}
	n, err := b.r.Read(p)
	if int64(n) > b.left {
		return 0, rest.NewRefusalWith(http.StatusRequestEntityTooLarge, service.CodeArtifactTooLarge,
			fmt.Sprintf("body: the bytes went past this node's limit of %d bytes (serve --max-artifact-bytes); nothing of them was kept", b.limit),
			api.M("limit", api.U(uint64(b.limit))))
	}
	b.left -= int64(n)
	return n, err
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
