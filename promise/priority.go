package promise

import (
	"strconv"

	"tally/jsonline"
	"tally/priority"
	"tally/refuse"
)

// A promise's priority lives in its meta object, as "priority": 0 (highest)
// to priority.Max. A promise line keeps pinki's members exactly, and
// pinki keeps meta as it is, so a ledger exported to pinki and imported
// back carries the priority unchanged. Absent, or anything but an integer
// in range (meta is the user's own), it is priority.Default.

// MetaPriority is the priority a meta object records, and whether it
// records one.
func MetaPriority(meta string) (int, bool) {
	p, ok := priority.Default, false
	if meta == "" {
		return p, false
	}
	_ = jsonline.Object([]byte(meta), func(k, v []byte) error {
		if !jsonline.KeyIs(k, "priority") {
			return nil
		}
		if n, err := strconv.Atoi(string(v)); err == nil && n >= 0 && n <= priority.Max {
			p, ok = n, true
		}
		return nil
	})
	return p, ok
}

// WithPriority returns meta (a JSON object as a person gives it, or "")
// compacted, with "priority": p added as its last member: what a
// declaration's --priority records. The default priority is not recorded;
// a meta that already names another priority is refused.
func WithPriority(meta string, p int) (string, error) {
	if p < 0 || p > priority.Max {
		return "", refuse.Invalidf("priority", "must be an integer from 0 (highest) to "+strconv.Itoa(priority.Max))
	}
	meta, err := NormalizeMeta(DefaultLimits(), meta)
	if err != nil {
		return "", err
	}
	has := false
	if meta != "" {
		_ = jsonline.Object([]byte(meta), func(k, _ []byte) error {
			has = has || jsonline.KeyIs(k, "priority")
			return nil
		})
	}
	if has {
		if q, ok := MetaPriority(meta); !ok || q != p {
			return "", refuse.Invalidf("priority", "meta names another priority; give it in one place")
		}
		return meta, nil
	}
	if p == priority.Default {
		return meta, nil
	}
	member := `"priority":` + strconv.Itoa(p)
	if meta == "" {
		return "{" + member + "}", nil
	}
	return meta[:len(meta)-1] + "," + member + "}", nil
}
