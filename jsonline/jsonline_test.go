package jsonline

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"
)

func TestAppendStringWire(t *testing.T) {
	cases := map[string]string{
		"plain":          `"plain"`,
		"q\"b\\":         `"q\"b\\"`,
		"\n\r\t\b\f\x01": `"\n\r\t\b\f\u0001"`,
		"<&>/":           `"<&>/"`,
		"é…\u2028":       "\"é…\u2028\"",
		"bad\xffutf8":    "\"bad\ufffdutf8\"",
	}
	for in, want := range cases {
		if got := string(AppendString(nil, in)); got != want {
			t.Errorf("AppendString(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestObjectMembers(t *testing.T) {
	line := []byte(` {"a":"x\u00e9","b":[1,{"c":null}],"d":-1.5e3,"e":true} `)
	var keys []string
	var vals []string
	if err := Object(line, func(k, v []byte) error {
		keys = append(keys, string(k))
		vals = append(vals, string(v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 4 || vals[1] != `[1,{"c":null}]` || vals[2] != "-1.5e3" {
		t.Fatalf("keys %v vals %v", keys, vals)
	}
	s, err := String([]byte(`"x\u00e9\ud83d\ude00\n"`))
	if err != nil || s != "xé😀\n" {
		t.Fatalf("String = %q, %v", s, err)
	}
	for _, bad := range []string{`{"a":1,}`, `{"a" 1}`, `{"a":01}`, `{"a":"\x"}`, "{\"a\":\"\x01\"}", `{"a":1}x`, `[1]`, `{"a":tru}`, "{\"a\":\"\xff\"}", `{"a":-}`, `{"a":1.}`} {
		if err := Object([]byte(bad), func(k, v []byte) error { return nil }); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// FuzzValid checks the scanner against encoding/json: the same inputs are
// valid, and strings decode to the same text.
func FuzzValid(f *testing.F) {
	for _, s := range []string{`{"a":"b"}`, `{"a":[1,2,{"x":null}],"b":"\u00e9\ud800"}`, `{}`, `{"a":1e5}`, `"x"`, `[]`, `{"a":"\\\""}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ours := Valid(b)
		theirs := json.Valid(b)
		// encoding/json accepts invalid UTF-8 inside strings; tally does not.
		if ours != theirs && !(theirs && !utf8.Valid(b)) {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, ours, theirs)
		}
		b = bytes.Trim(b, " \t\r\n")
		if !ours || len(b) == 0 || b[0] != '"' {
			return
		}
		got, err := String(b)
		if err != nil {
			t.Fatalf("String(%q): %v", b, err)
		}
		var want string
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("encoding/json refused %q: %v", b, err)
		}
		if got != want {
			t.Fatalf("String(%q) = %q, encoding/json %q", b, got, want)
		}
		var round string
		if err := json.Unmarshal(AppendString(nil, got), &round); err != nil || round != got {
			t.Fatalf("AppendString(%q) does not round-trip: %q %v", got, round, err)
		}
	})
}

// TestAppendEscaped pins that every string of a value, member names
// included, is written again by AppendString, and nothing else changes.
func TestAppendEscaped(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a":"b","c":[1,true,null,"d"]}`, `{"a":"b","c":[1,true,null,"d"]}`},
		{`"\u2028\u2029"`, "\"\u2028\u2029\""},
		{`"a\ufffdb"`, "\"a\uFFFDb\""},
		{`{"\u2028":"x"}`, "{\"\u2028\":\"x\"}"},
		{`"\u0008\u000c\u0001\/"`, `"\b\f\u0001/"`},
		{`"\\u2028"`, `"\\u2028"`},
		{`"<>&\u003c"`, `"<>&<"`},
		{`[ "a" , "\n" ]`, `[ "a" , "\n" ]`},
	} {
		got, err := AppendEscaped(nil, []byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("AppendEscaped(%s) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := AppendEscaped(nil, []byte(`"abc`)); err == nil {
		t.Error("an unterminated string: no error")
	}
}

func TestAppendFields(t *testing.T) {
	got := AppendFields([]byte(`{"a":1`), []Field{{Key: "x-note", Value: []byte(`{"b":[1,2]}`)}, {Key: "q\"\u2028", Value: []byte(`null`)}})
	if want := "{\"a\":1,\"x-note\":{\"b\":[1,2]},\"q\\\"\u2028\":null"; string(got) != want {
		t.Errorf("AppendFields = %q, want %q", got, want)
	}
	if got := AppendFields(nil, nil); len(got) != 0 {
		t.Errorf("AppendFields of none = %q", got)
	}
}

// FuzzAppendEscaped checks that re-escaping a valid value keeps what it
// means to encoding/json, keeps it valid, and is done once for all.
func FuzzAppendEscaped(f *testing.F) {
	for _, s := range []string{`{"a":"\u2028","b":["\ufffd",1,null]}`, `"\\u2028"`, `"\ud800x"`, "\"\xff\"", `{"\u0061":"\/"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		if !Valid(v) || !json.Valid(v) {
			return
		}
		out, err := AppendEscaped(nil, v)
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if !Valid(out) {
			t.Fatalf("%q: re-escaped as %q, not valid", v, out)
		}
		read := func(b []byte) (v any) {
			d := json.NewDecoder(bytes.NewReader(b))
			d.UseNumber() // numbers as written: an out-of-range one is not an error
			if err := d.Decode(&v); err != nil {
				t.Fatalf("%q: %v", b, err)
			}
			return v
		}
		if a, b := read(v), read(out); !reflect.DeepEqual(a, b) {
			t.Fatalf("%q: re-escaped as %q reads as %#v, not %#v", v, out, b, a)
		}
		if again, _ := AppendEscaped(nil, out); !bytes.Equal(again, out) {
			t.Fatalf("%q: re-escaped twice differs: %q, %q", v, out, again)
		}
	})
}
