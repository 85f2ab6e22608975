package jsondoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"sort"
	"strings"

	"tally/rule"
)

// Strict decodes b, which must be one JSON object and nothing after it, into
// doc (a pointer to a struct with json tags). A member doc does not have is
// refused by name, listing the members it has; a member of the wrong type is
// refused by name. where names the input in other refusals ("stdin", "body").
// The CLI's stdin documents and the server's request bodies share it, so one
// document means the same on both.
func Strict(where string, b []byte, doc any) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return rule.Invalidf(where, "must be one JSON object")
	}
	if err := CheckSyntax(where, b); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(doc); err != nil {
		return strictError(where, err, doc)
	}
	if _, err := dec.Token(); err != io.EOF {
		return rule.Invalidf(where, "must be one JSON object and nothing after it")
	}
	return nil
}

func strictError(where string, err error, doc any) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, `json: unknown field "`); ok {
		name = strings.TrimSuffix(name, `"`)
		return rule.Invalidf(name, "is not a field of this command ("+strings.Join(Fields(doc), ", ")+")")
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return rule.Invalidf(te.Field, "must be "+jsonKind(te.Type.Kind().String())+", not "+te.Value)
	}
	return rule.Invalidf(where, "not a JSON object: "+strings.TrimPrefix(msg, "json: "))
}

func jsonKind(k string) string {
	switch {
	case k == "string":
		return "a string"
	case k == "slice":
		return "an array"
	case k == "struct" || k == "map":
		return "an object"
	case k == "bool":
		return "true or false"
	}
	return "a number"
}

// Fields lists a document's member names from its json tags, sorted.
func Fields(doc any) []string {
	out := Declared(doc)
	sort.Strings(out)
	return out
}

// Declared lists a document's member names from its json tags in the order
// its fields are declared.
func Declared(doc any) []string {
	t := reflect.TypeOf(doc)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	if t.Kind() != reflect.Struct {
		return out
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" && f.Anonymous {
			// An embedded document's members are its container's, as
			// encoding/json decodes them.
			out = append(out, Declared(reflect.New(f.Type).Interface())...)
			continue
		}
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}
