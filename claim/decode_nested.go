package claim

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	"tally/jsonline"
)

// nested reads a nested value with the wire scanner when it is in canonical
// form (fast), else with encoding/json refusing unknown members: the slow
// path decides every case the fast one declines, so both accept the same.
func nested[T any](key string, raw []byte, dst *T, fast func([]byte, *T) bool) error {
	var v T
	if fast(raw, &v) {
		*dst = v
		return nil
	}
	var slow T
	if err := strictJSON(raw, &slow); err != nil {
		return derr(key, "malformed: %v", err)
	}
	*dst = slow
	return nil
}

// strictJSON unmarshals a nested value refusing unknown members.
func strictJSON(raw []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("data after the value")
	}
	return nil
}

// errDecline makes the fast path hand a value to encoding/json.
var errDecline = errors.New("not canonical")

// fields walks a validated object span whose member names are all plain
// (no escapes) and distinct (at most 16 names), calling fn with each name's
// index in names. Any other member, or a repeat, declines.
func fields(v []byte, names []string, fn func(i int, val []byte) bool) bool {
	var seen uint16
	err := jsonline.Object(v, func(k, val []byte) error {
		for i, n := range names {
			if string(k) == n {
				if seen&(1<<i) != 0 || jsonline.IsNull(val) || !fn(i, val) {
					return errDecline
				}
				seen |= 1 << i
				return nil
			}
		}
		return errDecline
	})
	return err == nil
}

// elems walks a validated array span, calling fn with each element span.
func elems(v []byte, fn func(el []byte) bool) bool {
	if len(v) < 2 || v[0] != '[' {
		return false
	}
	i := skipWS(v, 1)
	if v[i] == ']' {
		return true
	}
	for {
		end := valueEnd(v, i)
		if !fn(v[i:end]) {
			return false
		}
		i = skipWS(v, end)
		if v[i] == ']' {
			return true
		}
		i = skipWS(v, i+1) // a validated span has a ',' here
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// valueEnd returns the end of the validated value starting at i.
func valueEnd(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			i++
			for b[i] != '"' {
				if b[i] == '\\' {
					i++
				}
				i++
			}
			i++
			if depth == 0 {
				return i
			}
		case '{', '[':
			depth++
			i++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
			i++
			if depth == 0 {
				return i
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
			i++
		default:
			i++
		}
	}
	return i
}

func readString(val []byte, dst *string) bool {
	s, err := jsonline.String(val)
	*dst = s
	return err == nil
}

func readInt(val []byte, dst *int) bool {
	n, err := strconv.ParseInt(string(val), 10, strconv.IntSize)
	*dst = int(n)
	return err == nil
}

var validatorNames = []string{"name", "version"}

func readValidator(v []byte, dst *Validator) bool {
	return fields(v, validatorNames, func(i int, val []byte) bool {
		if i == 0 {
			return readString(val, &dst.Name)
		}
		return readString(val, &dst.Version)
	})
}

// readList reads a JSON array into *dst, each element by read: an empty
// array is an empty slice, not nil, and *dst holds the elements read
// before one that fails.
func readList[T any](v []byte, dst *[]T, read func(el []byte, x *T) bool) bool {
	out := []T{}
	ok := elems(v, func(el []byte) bool {
		var x T
		if !read(el, &x) {
			return false
		}
		out = append(out, x)
		return true
	})
	*dst = out
	return ok
}

func readValidators(v []byte, dst *[]Validator) bool { return readList(v, dst, readValidator) }

var refNames = []string{"artifact", "digest"}

func readRefs(v []byte, dst *[]Ref) bool {
	return readList(v, dst, func(el []byte, r *Ref) bool {
		return fields(el, refNames, func(i int, val []byte) bool {
			if i == 0 {
				return readString(val, &r.Artifact)
			}
			return readString(val, &r.Digest)
		})
	})
}

var bindingNames = []string{"slot", "artifact", "digest"}

func readBindings(v []byte, dst *[]Binding) bool {
	return readList(v, dst, func(el []byte, b *Binding) bool {
		return fields(el, bindingNames, func(i int, val []byte) bool {
			switch i {
			case 0:
				return readString(val, &b.Slot)
			case 1:
				return readString(val, &b.Artifact)
			}
			return readString(val, &b.Digest)
		})
	})
}

var checkNames = []string{"id", "validator", "evaluator", "mode", "phases", "attempts", "fallbacks"}

func readCheck(v []byte, c *CheckSpec) bool {
	return fields(v, checkNames, func(i int, val []byte) bool {
		var s string
		switch i {
		case 0:
			return readString(val, &c.ID)
		case 1:
			return readValidator(val, &c.Validator)
		case 2:
			return readString(val, &c.Evaluator)
		case 3:
			ok := readString(val, &s)
			c.Mode = Mode(s)
			return ok
		case 4:
			ss, err := jsonline.Strings(val)
			if err != nil {
				return false
			}
			c.Phases = make([]Phase, len(ss))
			for j, p := range ss {
				c.Phases[j] = Phase(p)
			}
			return true
		case 5:
			return readInt(val, &c.Attempts)
		}
		return readValidators(val, &c.Fallbacks)
	})
}

var slotNames = []string{"name", "mode", "checks"}

func readSlots(v []byte, dst *[]SlotSpec) bool {
	return readList(v, dst, func(el []byte, sl *SlotSpec) bool {
		return fields(el, slotNames, func(i int, val []byte) bool {
			switch i {
			case 0:
				return readString(val, &sl.Name)
			case 1:
				var s string
				ok := readString(val, &s)
				sl.Mode = Mode(s)
				return ok
			}
			return readList(val, &sl.Checks, readCheck)
		})
	})
}
