package replica

// Whether a moving session's log names an artifact record, read ahead of
// its install. The install records the content those records name (so a
// log that names none is not folded), and reading a log of a million
// events for them in the destination's apply loop held every other
// session of the group behind it (on three nodes holding both groups, the
// other sessions' p99 was 8x during a move). A node's stage reads the log
// it holds or staged, off the loop, and remembers how far and what it
// found, with the chain hash there; the install reads only what follows,
// once the log's line at that offset still ends with that hash (the
// chain hash there stands for every byte before it).

import (
	"bytes"
	"errors"
	"io"
	"os"

	"tally/claim"
	"tally/store"
)

// scanMark is how far a session's log was read for artifact records: the
// position of its line there, and whether a record before it named one.
type scanMark struct {
	at    store.Position
	named bool
}

// artifactNeedle is what a line naming an artifact record holds.
var artifactNeedle = []byte(`"` + claim.TypeArtifact)

// namesArtifacts reports whether the log at path, the session's, names an
// artifact record, reading only what follows the last mark of it that
// still holds.
func (m *dataSM) namesArtifacts(tenant, session, path string) (bool, error) {
	m.scanMu.Lock()
	defer m.scanMu.Unlock()
	return m.scanLocked(tenant+"/"+session, path)
}

// scanAhead reads the log at path for artifact records, off the apply
// loop, and marks how far (a stage's, for the install that follows).
func (m *dataSM) scanAhead(tenant, session, path string) {
	m.scanMu.Lock()
	defer m.scanMu.Unlock()
	_, _ = m.scanLocked(tenant+"/"+session, path) // the install reads again what this could not
}

func (m *dataSM) scanLocked(name, path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	from := int64(0)
	if mk, ok := m.scanned[name]; ok && mk.at.Offset <= fi.Size() {
		if at, err := store.Tail(f, mk.at.Offset); err == nil && at == mk.at {
			if mk.named {
				return true, nil
			}
			from = mk.at.Offset
		}
	}
	named, err := readerMentions(io.NewSectionReader(f, max(from-int64(len(artifactNeedle))+1, 0), fi.Size()), artifactNeedle)
	if err != nil {
		return false, err
	}
	end, err := store.Tail(f, fi.Size())
	if err != nil {
		return false, err
	}
	if m.scanned == nil {
		m.scanned = map[string]scanMark{}
	}
	m.scanned[name] = scanMark{at: end, named: named}
	return named, nil
}

// readerMentions reports whether r holds needle, read in 1 MiB steps.
func readerMentions(r io.Reader, needle []byte) (bool, error) {
	buf := make([]byte, 1<<20+len(needle))
	keep := 0
	for {
		n, err := r.Read(buf[keep:])
		if bytes.Contains(buf[:keep+n], needle) {
			return true, nil
		}
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		// Keep the end that may begin the needle.
		tail := min(keep+n, len(needle)-1)
		copy(buf, buf[keep+n-tail:keep+n])
		keep = tail
	}
}
