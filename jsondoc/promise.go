package jsondoc

import (
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
func PromiseList(now time.Time, name string, vs []promise.View) []byte {
	return Doc(M("now", S(instant.Format(now))), M(name, ViewArray(vs)))
}

// ViewArray encodes views as a JSON array.
func ViewArray(vs []promise.View) []byte {
	b := make([]byte, 0, 512*len(vs)+2)
	b = append(b, '[')
	for i := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = vs[i].AppendJSON(b)
	}
	return append(b, ']')
}
