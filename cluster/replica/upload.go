package replica

// Uploads: bytes staged in a data group, chunk by chunk, before the command
// that uses them (an artifact's publication, a verdict's evidence) names
// them. Each chunk is a Stage command carrying its bytes as the entry's
// payload; every replica appends it to the upload's staging file, so every
// replica stages the same bytes, and the command that uses the upload reads
// them (OpenUpload), checked against the size and digest its proposer read.
//
// An upload's state is a record beside the applied index (its staged size;
// once used, the content it was), written with the applied index after each
// batch. After a crash the staging files are cut back to their records, so
// a batch applied again stages its chunks once. Every decision is made from
// the records and the command's instant, never from what the directory
// holds: an upload started more than UploadMaxAge before a command's
// instant is refused by that command on every replica, and its record and
// file go after the batch.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/zeebo/blake3"

	"tally/artifact"
	"tally/digest"
	"tally/refuse"
	"tally/rest"
	"tally/service"
	"tally/store"
)

// MethodStage is the command that appends a chunk to an upload. Stored in
// the raft log: do not rename.
const MethodStage = "Stage"

// MethodUnstage is the command that abandons an upload at once (its bytes
// went past the limit, or stopped coming): every replica removes its
// record and staged bytes after the batch. Stored in the raft log: do not
// rename.
const MethodUnstage = "Unstage"

// The bounds of an upload.
const (
	// MaxUploadSize bounds the bytes of one upload staged through the log
	// (the form before bytes travelled beside it, still applied so that
	// an old log replays the same).
	MaxUploadSize = 64 << 20
	// UploadMaxAge is how long after its start (its id's instant) an
	// upload may still be staged or used; past it, it is abandoned.
	UploadMaxAge = time.Hour
)

// kindUpload keys an upload's record: gkey(group, kindUpload) + its id.
const kindUpload = 'u'

// StageDoc is a Stage command's document; its payload is the chunk.
type StageDoc struct {
	Upload string `json:"upload"`
	Offset int64  `json:"offset"`
}

// Upload names staged bytes as the command that uses them does: the
// upload, and the size and content digest its proposer read.
type Upload struct {
	ID      string `json:"id"`
	Size    int64  `json:"size"`
	Content string `json:"content"`
	// Holders are the nodes holding a verified copy of bytes that travel
	// beside the log (content.go): the node that took them. None for
	// bytes staged through the log, as commands before them were.
	Holders []uint64 `json:"holders,omitempty"`
}

// NewUploadID names an upload started at start (its proposer's clock),
// told apart by nonce: 16 hex digits of each, so an id is a file name.
func NewUploadID(start time.Time, nonce uint64) string {
	return fmt.Sprintf("%016x-%016x", uint64(start.UnixNano()), nonce)
}

// uploadStart is the instant an upload id names; any other name is
// refused.
func uploadStart(id string) (int64, error) {
	start, nonce, ok := strings.Cut(id, "-")
	if !ok || !lowerHex(start, 16) || !lowerHex(nonce, 16) {
		return 0, refuse.Invalidf("upload", fmt.Sprintf("%q is not an upload id (16 hex digits, '-', 16 hex digits)", id))
	}
	v, _ := strconv.ParseUint(start, 16, 64)
	return int64(v), nil
}

func lowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// uploadRecord is an upload's state: the bytes staged, and once a command
// used them, the content they were (the bytes are then in the content
// store and the staging file goes).
type uploadRecord struct {
	Size    int64  `json:"size"`
	Content string `json:"content,omitempty"`
	// abandoned: an Unstage of this batch dropped it (never written: its
	// record is deleted).
	abandoned bool
}

func (r *uploadRecord) used() bool { return r.Content != "" }

func uploadKey(group uint64, id string) []byte { return append(gkey(group, kindUpload), id...) }

// errLocalCopy marks a failure of this replica's own copy of staged or
// stored bytes, or of their records (Operational): the node stops rather
// than decide otherwise than the replicas whose copy is whole.
var errLocalCopy = errors.New("replica: this node's copy of the bytes or of their record failed")

// TooLarge is the refusal of bytes past MaxUploadSize.
func TooLarge(what string) error {
	return rest.NewRefusal(http.StatusRequestEntityTooLarge, string(refuse.Invalid),
		fmt.Sprintf("%s: at most %d bytes (%d MiB) on a cluster node", what, MaxUploadSize, MaxUploadSize>>20))
}

// stagingDir holds a group's staging files, named by upload id.
func (m *dataSM) stagingDir(group uint64) string {
	return filepath.Join(m.cfg.Root, "uploads", strconv.FormatUint(group, 10))
}

// batchUploads is one batch's view of its group's uploads: the records it
// read or changed, and the staging files it wrote. Only the loop uses it.
type batchUploads struct {
	m       *dataSM
	group   uint64
	records map[string]*uploadRecord
	changed map[string]bool
	files   map[string]*os.File
	// epoch is the group's placement epoch as of the entry being applied;
	// receipts, the custody receipts the batch recorded (custody.go).
	epoch    uint64
	receipts map[string]receiptRecord
	// contents, the content records the batch wrote (content.go).
	contents map[string]contentRecord
}

func (m *dataSM) beginUploads(group uint64) *batchUploads {
	return &batchUploads{m: m, group: group, records: map[string]*uploadRecord{}, changed: map[string]bool{}, files: map[string]*os.File{},
		receipts: map[string]receiptRecord{}, contents: map[string]contentRecord{}}
}

// usable is upload id's record, as of this batch, for a command at
// instant now: refused if the id is not one or the upload is abandoned.
func (b *batchUploads) usable(id string, now int64) (*uploadRecord, error) {
	start, err := uploadStart(id)
	if err != nil {
		return nil, err
	}
	if expired(start, now) {
		return nil, refuse.Conflictf("upload", fmt.Sprintf("upload %s started more than %v before this command: abandoned; send the bytes again", id, UploadMaxAge))
	}
	if r, ok := b.records[id]; ok && r.abandoned {
		return nil, refuse.Conflictf("upload", "upload "+id+" was abandoned: send the bytes again")
	} else if ok {
		return r, nil
	}
	r := &uploadRecord{}
	if _, err := b.m.get(uploadKey(b.group, id), r); err != nil {
		return nil, fmt.Errorf("%w: upload %s: %w", errLocalCopy, id, err)
	}
	b.records[id] = r
	return r, nil
}

// usableFor is usable for the command that names u: refused, too, if the
// upload was used for other bytes than u's.
func (b *batchUploads) usableFor(u Upload, now int64) (*uploadRecord, error) {
	r, err := b.usable(u.ID, now)
	if err == nil && r.used() && (r.Content != u.Content || r.Size != u.Size) {
		return nil, refuse.Conflictf("upload", fmt.Sprintf("upload %s was used for other bytes (%d bytes, content %s)", u.ID, r.Size, r.Content))
	}
	return r, err
}

func expired(start, now int64) bool { return now-start > int64(UploadMaxAge) }

// stage applies a Stage command at instant now: its chunk appended at its
// offset. A chunk already staged (a proposal committed twice) changes
// nothing; one past the staged end, or past MaxUploadSize, is refused.
func (m *dataSM) stage(c Command, now int64) Outcome {
	var d StageDoc
	if err := json.Unmarshal(c.Doc, &d); err != nil {
		return Outcome{Err: refuse.Invalidf("command", "a stage command's document: "+err.Error())}
	}
	b := m.batch
	r, err := b.usable(d.Upload, now)
	if err != nil {
		return Outcome{Err: err}
	}
	end := d.Offset + int64(len(c.Payload))
	switch {
	case r.used():
		return Outcome{Err: refuse.Conflictf("upload", "upload "+d.Upload+" was used: it takes no more bytes")}
	case d.Offset < 0:
		return Outcome{Err: refuse.Invalidf("offset", "must not be negative")}
	case end <= r.Size:
		return Outcome{Value: r.Size}
	case d.Offset != r.Size:
		return Outcome{Err: refuse.Conflictf("offset", fmt.Sprintf("upload %s holds %d bytes: a chunk at %d leaves a gap", d.Upload, r.Size, d.Offset))}
	case end > MaxUploadSize:
		return Outcome{Err: TooLarge("upload " + d.Upload)}
	}
	if err := b.write(d.Upload, d.Offset, c.Payload); err != nil {
		return Outcome{Err: err}
	}
	r.Size = end
	b.changed[d.Upload] = true
	return Outcome{Value: r.Size}
}

// unstage applies an Unstage command: the upload is abandoned, its record
// and staged bytes removed after the batch. One used is refused (its
// bytes are a record's); one unknown or already gone changes nothing.
func (m *dataSM) unstage(c Command, now int64) Outcome {
	var d StageDoc
	if err := json.Unmarshal(c.Doc, &d); err != nil {
		return Outcome{Err: refuse.Invalidf("command", "an unstage command's document: "+err.Error())}
	}
	b := m.batch
	r, err := b.usable(d.Upload, now)
	if err != nil {
		return Outcome{Err: err}
	}
	if r.used() {
		return Outcome{Err: refuse.Conflictf("upload", "upload "+d.Upload+" was used: its bytes are a record's")}
	}
	if f, ok := b.files[d.Upload]; ok {
		f.Close()
		delete(b.files, d.Upload)
	}
	r.abandoned = true
	b.changed[d.Upload] = true
	return Outcome{Value: r.Size}
}

// write writes p at off in upload id's staging file; the batch syncs it.
func (b *batchUploads) write(id string, off int64, p []byte) error {
	f, ok := b.files[id]
	if !ok {
		dir := b.m.stagingDir(b.group)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		var err error
		if f, err = os.OpenFile(filepath.Join(dir, id), os.O_CREATE|os.O_WRONLY, 0o644); err != nil {
			return err
		}
		b.files[id] = f
	}
	_, err := f.WriteAt(p, off)
	return err
}

// sync makes the batch's staged bytes durable (the files and the
// directory naming them) before the records that count them are written.
func (b *batchUploads) sync() error {
	var errs []error
	for id, f := range b.files {
		if err := f.Sync(); err != nil {
			errs = append(errs, fmt.Errorf("sync upload %s: %w", id, err))
		}
		errs = append(errs, f.Close())
	}
	if len(b.files) > 0 {
		errs = append(errs, store.SyncDir(b.m.stagingDir(b.group)))
	}
	clear(b.files)
	return errors.Join(errs...)
}

// close closes the staging files a failed batch left open.
func (b *batchUploads) close() {
	for _, f := range b.files {
		f.Close()
	}
	clear(b.files)
}

// record writes the batch's changed records into pb, drops the group's
// abandoned ones as of instant now, and returns the staging files to
// remove once pb is committed: those of uploads used or abandoned.
func (b *batchUploads) record(pb *pebble.Batch, now int64) ([]string, error) {
	if err := b.recordReceipts(pb); err != nil {
		return nil, err
	}
	if err := b.recordContents(pb); err != nil {
		return nil, err
	}
	var drop []string
	for id := range b.changed {
		r := b.records[id]
		if r.used() || r.abandoned {
			drop = append(drop, filepath.Join(b.m.stagingDir(b.group), id))
		}
		if r.abandoned {
			if err := pb.Delete(uploadKey(b.group, id), nil); err != nil {
				return nil, err
			}
			continue
		}
		if err := setJSON(pb, uploadKey(b.group, id), r); err != nil {
			return nil, err
		}
	}
	if b.m.noUploads[b.group] && len(b.changed) == 0 {
		// The group holds no upload record: none can have expired, and a
		// scan per batch cost a write its pebble iterator.
		return drop, nil
	}
	left := 0
	for id := range b.changed {
		if !b.records[id].abandoned {
			left++ // written in pb, which the scan does not see
		}
	}
	err := b.m.eachUpload(b.group, func(id string, _ uploadRecord) error {
		if start, err := uploadStart(id); err == nil && !expired(start, now) {
			left++
			return nil
		}
		drop = append(drop, filepath.Join(b.m.stagingDir(b.group), id))
		return pb.Delete(uploadKey(b.group, id), nil)
	})
	b.m.noUploads[b.group] = err == nil && left == 0
	return drop, err
}

// eachUpload calls f with each of the group's upload records, by id.
func (m *dataSM) eachUpload(group uint64, f func(id string, r uploadRecord) error) error {
	return m.scan(gkey(group, kindUpload), func(id string, v []byte) error {
		var r uploadRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("replica: upload record %q: %w", id, err)
		}
		return f(id, r)
	})
}

// removeStaged removes staging files whose records no longer need them;
// one left behind by a crash goes at the next start (reconcileUploads).
func (m *dataSM) removeStaged(paths []string) {
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			m.log.Warn("replica: remove a staging file", "path", p, "err", err)
		}
	}
}

// reconcileUploads brings the group's staging files back to their
// records: a file without a record, or of a used upload, goes; one longer
// than its record (chunks of a batch a crash interrupted) is cut back.
func (m *dataSM) reconcileUploads(group uint64) error {
	dir := m.stagingDir(group)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		path := filepath.Join(dir, e.Name())
		var r uploadRecord
		found, err := m.get(uploadKey(group, e.Name()), &r)
		if err != nil {
			return err
		}
		if !found || r.used() {
			m.removeStaged([]string{path})
			continue
		}
		if err := cutStaged(path, r.Size); err != nil {
			return fmt.Errorf("upload %s: %w", e.Name(), err)
		}
	}
	return nil
}

// cutStaged cuts a staging file back to size, durably.
func cutStaged(path string, size int64) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	switch {
	case fi.Size() < size:
		return fmt.Errorf("%w: %s holds %d bytes, short of the %d recorded", errLocalCopy, path, fi.Size(), size)
	case fi.Size() == size:
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// OpenUpload opens the bytes of upload u for the command being applied in
// c's session. Staged bytes are read from the staging file and hashed as
// they are read: if they are not exactly u (this replica's copy is
// damaged), the stream ends in an error instead of io.EOF, and the node
// stops. Read to the end, the upload is used; a command naming it again
// (a proposal committed twice) reads the same bytes from the content
// store. A refusal (an upload abandoned, incomplete, or used for other
// bytes) is decided from the records alone, the same on every replica.
func (m *dataSM) OpenUpload(c service.Call, u Upload) (io.ReadCloser, error) {
	// The call is the command the batch runs: its group's uploads are the
	// batch's (the directory, applied at another pace, is not asked).
	b := m.batch
	if b == nil {
		return nil, errors.New("replica: OpenUpload outside a data group's batch")
	}
	want, err := digest.ParseContentDigest(u.Content)
	if err != nil {
		return nil, refuse.Invalidf("content", "must be a content digest (64 hex digits)")
	}
	if u.Beside() {
		return m.openBeside(b, want, u)
	}
	if u.Size > MaxUploadSize {
		return nil, TooLarge("upload " + u.ID)
	}
	r, err := b.usableFor(u, m.now.Load())
	if err != nil {
		return nil, err
	}
	switch {
	case r.used():
		return m.openStored(want)
	case r.Size != u.Size:
		return nil, refuse.Conflictf("upload", fmt.Sprintf("upload %s holds %d bytes of the %d its command names", u.ID, r.Size, u.Size))
	}
	var f io.ReadCloser = io.NopCloser(bytes.NewReader(nil))
	if u.Size > 0 {
		if f, err = os.Open(filepath.Join(m.stagingDir(b.group), u.ID)); err != nil {
			return nil, fmt.Errorf("%w: upload %s: %w", errLocalCopy, u.ID, err)
		}
	}
	used := func() {
		r.Content = u.Content
		b.changed[u.ID] = true
	}
	return &stagedReader{f: f, r: io.LimitReader(f, u.Size), h: digest.NewContentHasher(), want: want, size: u.Size, id: u.ID, used: used}, nil
}

// openStored opens content the content store holds, verified; a failure is
// this replica's copy's.
func (m *dataSM) openStored(d digest.ContentDigest) (io.ReadCloser, error) {
	objs, err := artifact.OpenStore(store.ObjectsDir(m.cfg.Root))
	if err != nil {
		return nil, err
	}
	rc, err := objs.Open(context.Background(), d)
	if err != nil {
		return nil, fmt.Errorf("%w: content %s: %w", errLocalCopy, d, err)
	}
	return localCopy{rc}, nil
}

// localCopy reports a failed read of a stored copy as this replica's own.
type localCopy struct{ io.ReadCloser }

func (l localCopy) Read(p []byte) (int, error) {
	n, err := l.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: %w", errLocalCopy, err)
	}
	return n, err
}

// stagedReader reads an upload's staged bytes, hashing them; at their end
// it checks them against the content named and marks the upload used.
type stagedReader struct {
	f    io.Closer
	r    io.Reader
	h    *blake3.Hasher
	want digest.ContentDigest
	n    int64
	size int64
	id   string
	used func()
	err  error
}

func (s *stagedReader) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.r.Read(p)
	s.h.Write(p[:n])
	s.n += int64(n)
	switch {
	case err == io.EOF:
		if got := digest.ContentSum(s.h); s.n != s.size || got != s.want {
			err = fmt.Errorf("%w: upload %s: staged %d bytes of content %s, want %d of %s", errLocalCopy, s.id, s.n, got, s.size, s.want)
		} else {
			s.used()
		}
		s.err = err
	case err != nil:
		err = fmt.Errorf("%w: upload %s: %w", errLocalCopy, s.id, err)
		s.err = err
	}
	return n, err
}

func (s *stagedReader) Close() error { return s.f.Close() }
