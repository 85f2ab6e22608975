package api

import (
	"io"
	"strconv"
	"time"

	"tally/instant"
	"tally/jsonline"
	"tally/promise"
)

// PromiseWrite is the document a promise write answers with: the record's
// sequence, the promise as it stands after it, and any warnings.
func PromiseWrite(seq uint64, v *promise.View, warnings []string) []byte {
	warn := []byte("[]")
	if len(warnings) > 0 {
		warn = jsonline.AppendStrings(nil, warnings)
	}
	return Doc(M("seq", U(seq)), M("promise", v.AppendJSON(nil)), M("warnings", warn))
}

// PromiseShow is the document of one promise at now.
func PromiseShow(now time.Time, v *promise.View) []byte {
	return Doc(M("now", S(instant.Format(now))), M("promise", v.AppendJSON(nil)))
}

// PromiseList is the document of a list of promises at now, under name.
// It is Doc(M("now", …), M(name, ViewArray(vs))) written into one buffer:
// a list of 10,000 is megabytes, which members would copy twice more.
func PromiseList(now time.Time, name string, vs []promise.View) []byte {
	b := appendListHead(make([]byte, 0, 96+len(name)+512*len(vs)), now, name)
	b = appendViews(b, vs)
	return append(b, '}', '\n')
}

// appendListHead appends a list document's opening up to its list: the
// schema version, now and the list's name.
func appendListHead(b []byte, now time.Time, name string) []byte {
	b = append(b, `{"schema_version":`...)
	b = strconv.AppendInt(b, SchemaVersion, 10)
	b = append(b, `,"now":`...)
	b = instant.AppendQuoted(b, now)
	b = append(b, ',')
	b = jsonline.AppendString(b, name)
	return append(b, ':')
}

// WritePromiseList writes PromiseList(now, name, vs) to w in chunks of
// about 64 KB, the same bytes without the whole document in memory: a
// list of 10,000 is megabytes a process would allocate and clear, page by
// page, only to write it once.
func WritePromiseList(w io.Writer, now time.Time, name string, vs []promise.View) error {
	const chunk = 64 << 10
	b := append(appendListHead(make([]byte, 0, chunk+4096), now, name), '[')
	for i := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = vs[i].AppendJSON(b)
		if len(b) >= chunk {
			if _, err := w.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	_, err := w.Write(append(b, ']', '}', '\n'))
	return err
}

// ViewArray encodes views as a JSON array.
func ViewArray(vs []promise.View) []byte { return appendViews(make([]byte, 0, 512*len(vs)+2), vs) }

func appendViews(b []byte, vs []promise.View) []byte {
	b = append(b, '[')
	for i := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = vs[i].AppendJSON(b)
	}
	return append(b, ']')
}
