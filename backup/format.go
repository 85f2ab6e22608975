// Package backup is tally's backup file: every session's log up to a cut
// and the content-store objects those logs name, in one stream that
// verifies itself (docs/BACKUP.md). Writer makes one, Reader reads one back
// verifying every byte as it goes, Take writes a ledger directory's sessions
// (a local ledger, or a cluster node's replica) and Restore writes a backup
// into a new ledger directory.
//
// The file, format 1:
//
//	tally backup v1\n
//	{header: format, tally, log_format, created, source}\n
//	session {"tenant","session","seq","hash","bytes"}\n  <bytes: the log's lines 1..seq>
//	…                                                     (sessions in order, each once)
//	object {"content","bytes"}\n                         <bytes: the object>
//	…                                                     (objects in order, after the sessions)
//	end {"sessions","objects","digest"}\n
//
// The digest is BLAKE3 (derive-key, context DigestContext) over every byte
// before the end line. Nothing may follow it.
package backup

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/zeebo/blake3"

	"tally/claim"
	"tally/digest"
	"tally/promise"
	"tally/sessionname"
	"tally/store"
)

// Format is the backup format this build writes and reads.
const Format = 1

// Magic is the file's first line. Part of format 1: do not change.
const Magic = "tally backup v1\n"

// magicPrefix is what every version's first line begins with, so a file of
// another version is named as one rather than as no backup at all.
const magicPrefix = "tally backup v"

// DigestContext domain-separates the file's digest from every other BLAKE3
// use. Part of format 1: do not change.
const DigestContext = "tally 2026-12 backup v1 file"

// MediaType is a backup's media type over HTTP.
const MediaType = "application/vnd.tally.backup"

// ErrorTrailer carries, over HTTP, why a backup stopped after its first
// bytes (the status was sent): the stream then lacks its end line, so the
// file does not verify either way.
const ErrorTrailer = "Tally-Backup-Error"

// The frames' kinds. Part of format 1: do not rename.
const (
	kindSession = "session"
	kindObject  = "object"
	kindEnd     = "end"
)

// Bounds on the lines that are not log lines.
const (
	headerMax = 4096 // the header line
	frameMax  = 1024 // a frame line: a kind and a small JSON object
)

// Source kinds.
const (
	SourceLedger  = "ledger"  // a ledger directory (local, or tally serve's)
	SourceCluster = "cluster" // a cluster, streamed by one of its nodes
)

// Source is what a backup was taken of.
type Source struct {
	Kind string `json:"kind"`
	// ClusterID, NodeID and Groups are the cluster's: its id, the node that
	// streamed the backup and its data groups.
	ClusterID string `json:"cluster_id,omitempty"`
	NodeID    uint64 `json:"node_id,omitempty"`
	Groups    int    `json:"groups,omitempty"`
	// Added is how many data groups were added to the cluster after its
	// bootstrap's Groups (tally cluster groups add), numbered after them;
	// a restore adds them again.
	Added int `json:"added_groups,omitempty"`
}

// Header is a backup's first record.
type Header struct {
	Format    int    `json:"format"`
	Tally     string `json:"tally"`      // the tally release that wrote it
	LogFormat int    `json:"log_format"` // the log format of its sessions
	// Created is when the backup began: every write acknowledged before it
	// is in the backup; a write after it may or may not be.
	Created time.Time `json:"created"`
	Source  Source    `json:"source"`
	// Settings are a ledger directory's own (its tally.json), which a
	// ledger restored from it takes.
	Settings *store.Settings `json:"settings,omitempty"`
}

// check names what a header breaks, for the writer and the reader alike.
func (h Header) check() error {
	switch {
	case h.Format != Format:
		return fmt.Errorf("format: %d, but this tally writes and reads backup format %d", h.Format, Format)
	case h.LogFormat != store.FormatVersion:
		return fmt.Errorf("log_format: %d, but this tally reads log format %d", h.LogFormat, store.FormatVersion)
	case h.Source.Kind != SourceLedger && h.Source.Kind != SourceCluster:
		return fmt.Errorf("source.kind: %q: must be %q or %q", h.Source.Kind, SourceLedger, SourceCluster)
	case h.Source.Kind == SourceCluster && h.Source.ClusterID == "":
		return errors.New("source.cluster_id: required for a cluster's backup")
	case h.Created.IsZero():
		return errors.New("created: required")
	}
	return nil
}

// Cut is one session in a backup: its log up to line Seq, whose chain hash
// is Hash, Bytes long.
type Cut struct {
	Tenant, Session string
	Seq             uint64
	Hash            [32]byte
	Bytes           int64
	// Group is a cluster session's data group when it is not the one its
	// name hashes to over the bootstrap's groups (placed or moved there);
	// 0 otherwise. A restore moves it there again.
	Group uint64
}

// Name is the session's tenant/session.
func (c Cut) Name() string { return c.Tenant + "/" + c.Session }

// check names what a cut breaks, given the session before it.
func (c Cut) check(prev *Cut) error {
	if err := sessionname.Check("tenant", c.Tenant); err != nil {
		return err
	}
	if err := sessionname.Check("session", c.Session); err != nil {
		return err
	}
	switch {
	case c.Seq == 0 || c.Bytes <= 0:
		return errors.New("seq, bytes: a session holds at least one line")
	case prev != nil && cmp.Or(cmp.Compare(c.Tenant, prev.Tenant), cmp.Compare(c.Session, prev.Session)) <= 0:
		return fmt.Errorf("comes after %s: sessions are in order, each once", prev.Name())
	}
	return nil
}

// Object is one content-store object in a backup.
type Object struct {
	Content digest.ContentDigest
	Bytes   int64
}

// Summary is what a backup holds, as its writer wrote it or its reader
// verified it.
type Summary struct {
	Header      Header
	Sessions    []Cut
	Objects     int
	ObjectBytes int64
	Size        int64    // the file's length, its end line included
	Digest      [32]byte // over every byte before the end line
}

// The frames' documents.
type sessionFrame struct {
	Tenant  string `json:"tenant"`
	Session string `json:"session"`
	Seq     uint64 `json:"seq"`
	Hash    string `json:"hash"`
	Bytes   int64  `json:"bytes"`
	Group   uint64 `json:"group,omitempty"`
}

type objectFrame struct {
	Content string `json:"content"`
	Bytes   int64  `json:"bytes"`
}

type endFrame struct {
	Sessions int    `json:"sessions"`
	Objects  int    `json:"objects"`
	Digest   string `json:"digest"`
}

func (c Cut) frame() sessionFrame {
	return sessionFrame{Tenant: c.Tenant, Session: c.Session, Seq: c.Seq, Hash: hex.EncodeToString(c.Hash[:]), Bytes: c.Bytes, Group: c.Group}
}

// appendFrame appends a frame line: its kind, a space, its document.
func appendFrame(dst []byte, kind string, doc any) []byte {
	dst = append(dst, kind...)
	dst = append(dst, ' ')
	return append(dst, frameDoc(doc)...)
}

// frameDoc is a frame's document and the line's newline.
func frameDoc(doc any) []byte {
	b, err := json.Marshal(doc)
	if err != nil {
		panic(fmt.Sprintf("backup: encode a frame: %v", err)) // the frames are plain structs
	}
	return append(b, '\n')
}

// headerLine is the header's line as a Writer writes it.
func headerLine(h Header) []byte {
	h.Created = h.Created.UTC()
	b, err := json.Marshal(h)
	if err != nil {
		panic(fmt.Sprintf("backup: encode header: %v", err)) // a plain struct and a valid time
	}
	return append(b, '\n')
}

// decodeExact decodes line, one JSON object, into v and requires it to be
// the very bytes encode makes of v (members in order, no spaces, nothing
// unknown): each backup has one spelling, so what a reader accepts a
// writer makes again byte for byte.
func decodeExact(line []byte, v any, encode func() []byte) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if !bytes.Equal(line, encode()) {
		return errors.New("not written as tally writes it (its members, in order, without spaces)")
	}
	return nil
}

// parseHash reads a 64-hex-digit hash.
func parseHash(field, s string) ([32]byte, error) {
	var h [32]byte
	if len(s) != 64 {
		return h, fmt.Errorf("%s: must be 64 lowercase hex digits", field)
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil || hex.EncodeToString(h[:]) != s {
		return h, fmt.Errorf("%s: must be 64 lowercase hex digits", field)
	}
	return h, nil
}

func newDigest() *blake3.Hasher { return blake3.NewDeriveKey(DigestContext) }

func sum(h *blake3.Hasher) (d [32]byte) {
	h.Sum(d[:0])
	return d
}

// contentRef is the content-store object a log line names: the content of
// a claim.artifact record the claim family decodes (a record it does not
// decode is kept in the log and folded by nobody, and names nothing).
func contentRef(line []byte) (digest.ContentDigest, bool) {
	if !bytes.Contains(line, []byte(claim.TypeArtifact)) {
		return digest.ContentDigest{}, false
	}
	if typ, err := promise.PeekType(line); err != nil || typ != claim.TypeArtifact {
		return digest.ContentDigest{}, false
	}
	ev, err := claim.Decode(line)
	if err != nil {
		return digest.ContentDigest{}, false
	}
	d, err := digest.ParseContentDigest(ev.Content)
	return d, err == nil
}

// DamageError says what in a backup file is not what the format promises
// and where: the byte of the file, the part (header, a session, an object,
// the end).
type DamageError struct {
	Offset int64
	Part   string
	Reason string
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("backup file damaged: %s, at byte %d: %s", e.Part, e.Offset, e.Reason)
}
