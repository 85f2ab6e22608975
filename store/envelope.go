package store

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/zeebo/blake3"

	"tally/jsonline"
)

// FormatVersion is the log format this build writes and reads. A line with a
// higher version is refused with a message naming both, never guessed at.
const FormatVersion = 1

// LineMax bounds one log line. A longer line is damage, not a record.
const LineMax = 1 << 20

// chainContext domain-separates the chain hash from every other BLAKE3 use.
// Part of format v1: do not change.
const chainContext = "tally 2026-11 log v1 chain"

const (
	envelopeOpen = `"tally":{`
	hashOpen     = `"hash":"`
	hashHexLen   = 64
	lineClose    = `"}}`
	// suffixLen is the fixed tail of every line: "hash":"<64 hex>"}}
	suffixLen = len(hashOpen) + hashHexLen + len(lineClose)
)

// Envelope is what the log adds to a family's record on each line.
type Envelope struct {
	Version   int
	Seq       uint64
	Actor     string // the acting identity, when it differs from the record's party
	RequestID string
	Import    bool // appended by `tally import` from another tool's ledger
	Hash      [32]byte
}

// Record is what a caller appends: a family record as one compact JSON
// object, and the envelope facts the log cannot know.
type Record struct {
	Body      []byte
	Actor     string
	RequestID string
	Import    bool
}

// chain computes the hash of a line from the previous line's hash and the
// line's bytes before its own hash value.
func chain(h *blake3.Hasher, prev [32]byte, prefix []byte) (sum [32]byte) {
	h.Reset()
	h.Write(prev[:])
	h.Write(prefix)
	h.Sum(sum[:0])
	return sum
}

func newChainHasher() *blake3.Hasher { return blake3.NewDeriveKey(chainContext) }

// appendLine writes body with its envelope and the chain hash onto dst,
// ending in a newline.
func appendLine(dst []byte, h *blake3.Hasher, prev [32]byte, seq uint64, r Record) ([]byte, [32]byte, error) {
	body := bytes.TrimRight(r.Body, " \t\r\n")
	if len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' {
		return dst, [32]byte{}, fmt.Errorf("record is not a JSON object")
	}
	if bytes.IndexByte(body, '\n') >= 0 {
		return dst, [32]byte{}, fmt.Errorf("record spans more than one line")
	}
	start := len(dst)
	dst = append(dst, body[:len(body)-1]...)
	if len(bytes.TrimSpace(body[1:len(body)-1])) > 0 {
		dst = append(dst, ',')
	}
	dst = append(dst, envelopeOpen...)
	dst = append(dst, `"v":`...)
	dst = strconv.AppendInt(dst, FormatVersion, 10)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, seq, 10)
	if r.Actor != "" {
		dst = append(dst, `,"actor":`...)
		dst = jsonline.AppendString(dst, r.Actor)
	}
	if r.RequestID != "" {
		dst = append(dst, `,"rid":`...)
		dst = jsonline.AppendString(dst, r.RequestID)
	}
	if r.Import {
		dst = append(dst, `,"import":true`...)
	}
	dst = append(dst, ',')
	sum := chain(h, prev, dst[start:])
	dst = append(dst, hashOpen...)
	dst = hex.AppendEncode(dst, sum[:])
	dst = append(dst, lineClose...)
	if len(dst)-start+1 > LineMax {
		return dst[:start], [32]byte{}, fmt.Errorf("record makes a line of %d bytes, over the %d-byte limit", len(dst)-start+1, LineMax)
	}
	return append(dst, '\n'), sum, nil
}

// parseEnvelope reads the envelope of a line (without its newline) and
// returns it with the bytes the chain hash covers.
func parseEnvelope(line []byte) (Envelope, []byte, error) {
	var env Envelope
	if len(line) < suffixLen+len(envelopeOpen)+2 || string(line[len(line)-len(lineClose):]) != lineClose ||
		string(line[len(line)-suffixLen:len(line)-suffixLen+len(hashOpen)]) != hashOpen {
		return env, nil, fmt.Errorf("no tally envelope at the end of the line")
	}
	prefix := line[:len(line)-suffixLen]
	hexSum := line[len(line)-suffixLen+len(hashOpen) : len(line)-len(lineClose)]
	if _, err := hex.Decode(env.Hash[:], hexSum); err != nil {
		return env, nil, fmt.Errorf("envelope hash is not hex")
	}
	at := bytes.LastIndex(prefix, []byte(envelopeOpen))
	if at < 1 || (prefix[at-1] != ',' && prefix[at-1] != '{') || prefix[len(prefix)-1] != ',' {
		return env, nil, fmt.Errorf("malformed tally envelope")
	}
	fields := prefix[at+len(envelopeOpen) : len(prefix)-1]
	if fastEnvelope(fields, &env) {
		return env, prefix, nil
	}
	var buf [256]byte
	obj := append(append(append(buf[:0], '{'), fields...), '}')
	version := false
	err := jsonline.Object(obj, func(key, v []byte) error {
		var err error
		switch string(key) {
		case "v":
			var n uint64
			n, err = jsonline.Uint(v)
			env.Version, version = int(n), true
		case "seq":
			env.Seq, err = jsonline.Uint(v)
		case "actor":
			env.Actor, err = jsonline.String(v)
		case "rid":
			env.RequestID, err = jsonline.String(v)
		case "import":
			env.Import = string(v) == "true"
		}
		return err
	})
	if err != nil {
		return env, nil, fmt.Errorf("malformed tally envelope: %w", err)
	}
	if !version {
		return env, nil, fmt.Errorf("tally envelope has no format version")
	}
	if env.Version != FormatVersion {
		return env, nil, fmt.Errorf("log format v%d is not v%d, the format this tally reads; use a tally that knows v%d", env.Version, FormatVersion, env.Version)
	}
	return env, prefix, nil
}

// ParseEnvelope reads the envelope of a line (without its newline).
func ParseEnvelope(line []byte) (Envelope, error) {
	env, _, err := parseEnvelope(line)
	return env, err
}

// fastEnvelope reads the common envelope `"v":1,"seq":N` (nothing else)
// without the general scanner. It reports false for any other shape, which
// the general path then reads (or refuses).
func fastEnvelope(fields []byte, env *Envelope) bool {
	const head = `"v":1,"seq":`
	if len(fields) <= len(head) || string(fields[:len(head)]) != head {
		return false
	}
	digits := fields[len(head):]
	if len(digits) > 19 || (digits[0] == '0' && len(digits) > 1) {
		return false
	}
	var n uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + uint64(c-'0')
	}
	env.Version, env.Seq = 1, n
	return true
}

// StripEnvelope returns the family record of a line that carries a tally
// envelope, refusing a line whose envelope is malformed.
func StripEnvelope(line []byte) ([]byte, error) {
	if _, _, err := parseEnvelope(line); err != nil {
		return nil, err
	}
	return Body(line), nil
}

// Body returns the family record of a verified line: the line without
// tally's envelope, byte for byte as it was appended. The line must have
// passed Scan (or StripEnvelope).
func Body(line []byte) []byte {
	prefix := line[:len(line)-suffixLen]
	at := bytes.LastIndex(prefix, []byte(envelopeOpen))
	body := make([]byte, 0, at+1)
	body = append(body, line[:at-1]...)
	if line[at-1] == '{' {
		body = append(body, '{')
	}
	return append(body, '}')
}
