package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	"tally/jsonline"
	"tally/refuse"
)

// Decode decodes b, which must be one JSON object and nothing after it,
// into doc (a pointer to a document): the one strict decoder of every
// request document, on stdin, in a REST body and in an A2A record. A member
// doc does not have is refused by name (names are exact: "Claim" is not
// "claim"), listing the members it has; a member given twice, or a member
// with an empty name, is refused; a member of the wrong type is refused by
// name; a JSON syntax error says where it is (byte offset, line, column).
// where names the input in the other refusals ("stdin", "body").
//
// Duplicates are refused among the object's own members and those of the
// objects it holds directly (subject, anchor, meta); inside arrays the last
// of two members wins, as encoding/json has it.
func Decode(where string, b []byte, doc any) error {
	b = bytes.Trim(b, " \t\r\n") // JSON's whitespace, not Unicode's
	if len(b) == 0 || b[0] != '{' {
		return refuse.Invalidf(where, "must be one JSON object")
	}
	if err := jsonline.CheckSyntax(where, b); err != nil {
		return err
	}
	rv := reflect.ValueOf(doc)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		panic("api: Decode wants a pointer to a document")
	}
	rv = rv.Elem()
	fields := fieldsOf(rv.Type())
	// The members of the common types (strings, lists of strings, objects
	// of the caller's own) are set here as they are walked; a document with
	// any other, or a value not of its member's type, is decoded (again) by
	// encoding/json, which gives the refusal its words.
	slow := false
	err := eachMember(b, where, "", func(name string, v []byte) error {
		f, ok := fields.value(rv, name)
		switch {
		case !ok:
			return refuse.Invalidf(name, "is not a field of this command ("+strings.Join(Members(doc), ", ")+")")
		case f.Type() == objectType:
			if !jsonline.IsObject(v) {
				return refuse.Invalidf(name, "must be a JSON object")
			}
			f.SetString(string(v))
		case jsonline.IsNull(v): // as encoding/json: the member stays unset
			return nil
		case slow:
		case f.Type() == stringType:
			str, err := jsonline.String(v)
			if err != nil {
				slow = true
				break
			}
			f.SetString(str)
		case f.Type() == stringsType:
			list, err := jsonline.Strings(v)
			if err != nil {
				slow = true
				break
			}
			f.Set(reflect.ValueOf(list))
		default:
			slow = true
		}
		if jsonline.IsObject(v) {
			return eachMember(v, name, name+".", func(string, []byte) error { return nil })
		}
		return nil
	})
	if err != nil {
		if _, ok := refuse.As(err); ok {
			return err
		}
		return refuse.Invalidf(where, "must be one JSON object")
	}
	if !slow {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(doc); err != nil {
		return decodeError(where, err, doc)
	}
	if _, err := dec.Token(); err != io.EOF {
		return refuse.Invalidf(where, "must be one JSON object and nothing after it")
	}
	return nil
}

var (
	stringType  = reflect.TypeOf("")
	stringsType = reflect.TypeOf([]string(nil))
)

// field is one member of a document: its json name, where it is in the
// struct (through embedded documents) and its type.
type field struct {
	name  string
	index []int
	typ   reflect.Type
}

type fields []field

func (fs fields) value(v reflect.Value, name string) (reflect.Value, bool) {
	for i := range fs {
		if fs[i].name == name {
			return v.FieldByIndex(fs[i].index), true
		}
	}
	return reflect.Value{}, false
}

// fieldCache holds each document type's fields, facts of the type that
// never change once read, as encoding/json caches its own: reading them
// anew costs an allocation per struct field on every request.
var fieldCache sync.Map // reflect.Type → fields

func fieldsOf(t reflect.Type) fields {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.(fields)
	}
	var fs fields
	eachField(t, nil, func(name string, index []int, ft reflect.Type) {
		fs = append(fs, field{name: name, index: index, typ: ft})
	})
	fieldCache.Store(t, fs)
	return fs
}

// eachMember calls fn with each member of the object b (already checked
// as JSON) by its unescaped name, refusing an empty name (as the field
// owner) or one given twice (as prefix and the name).
func eachMember(b []byte, owner, prefix string, fn func(name string, v []byte) error) error {
	var buf [16]string
	seen := buf[:0] // a document has few members: a slice beats a map
	return jsonline.Object(b, func(key, v []byte) error {
		name := string(key)
		if bytes.IndexByte(key, '\\') >= 0 {
			var err error
			if name, err = jsonline.String(append(append([]byte{'"'}, key...), '"')); err != nil {
				return err
			}
		}
		switch {
		case name == "":
			return refuse.Invalidf(owner, "has a member with an empty name")
		case contains(seen, name):
			return refuse.Invalidf(prefix+name, "appears twice")
		}
		seen = append(seen, name)
		return fn(name, v)
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Object is a JSON object of the caller's own (a promise's meta), kept
// byte for byte as given; Decode refuses any other value.
type Object string

var objectType = reflect.TypeOf(Object(""))

// UnmarshalJSON keeps the object's bytes.
func (o *Object) UnmarshalJSON(b []byte) error {
	*o = Object(b)
	return nil
}

// MarshalJSON writes the object as it was given. A value that is not
// JSON is written as a string, which the receiver's rule refuses as not an
// object, as it refuses the value itself (a client sends what it was given).
func (o Object) MarshalJSON() ([]byte, error) {
	if o == "" {
		return []byte("null"), nil
	}
	if !json.Valid([]byte(o)) {
		return json.Marshal(string(o))
	}
	return []byte(o), nil
}

func decodeError(where string, err error, doc any) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, `json: unknown field "`); ok {
		name = strings.TrimSuffix(name, `"`)
		if name == "" { // inside an array, where the walk does not reach
			return refuse.Invalidf(where, "has a member with an empty name")
		}
		return refuse.Invalidf(name, "is not a field of this command ("+strings.Join(Members(doc), ", ")+")")
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return refuse.Invalidf(te.Field, "must be "+jsonKind(te.Type.Kind().String())+", not "+te.Value)
	}
	return refuse.Invalidf(where, "not a JSON object: "+strings.TrimPrefix(msg, "json: "))
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

// Members lists a document's members (its json names, embedded documents'
// included), sorted.
func Members(doc any) []string {
	out := Declared(doc)
	sort.Strings(out)
	return out
}

// Declared lists a document's members in the order the document declares
// them.
func Declared(doc any) []string {
	var out []string
	for _, f := range fieldsOf(reflect.TypeOf(doc)) {
		out = append(out, f.name)
	}
	return out
}

// eachField calls fn with each json member of the struct t (through
// pointers) and its index path below index, an embedded document's members
// as its container's, as encoding/json decodes them.
func eachField(t reflect.Type, index []int, fn func(name string, index []int, t reflect.Type)) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		at := append(slices.Clone(index), i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" && f.Anonymous {
			eachField(f.Type, at, fn)
			continue
		}
		if name != "" && name != "-" {
			fn(name, at, f.Type)
		}
	}
}
