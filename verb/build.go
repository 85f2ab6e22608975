package verb

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"tally/service"
)

// The constructors of the table's calls: each makes a verb's Call (and a
// write's Apply) from the Service method it runs, so an entry names the
// method once and every binding calls it the same way.

// result is what a Service method answers: a result that embeds its
// response document (service.Doc).
type result interface{ Document() service.Doc }

// docIn is in.Doc as a D: given as D or *D; none is D's zero value.
func docIn[D any](name string, in Input) (D, error) {
	switch d := in.Doc.(type) {
	case D:
		return d, nil
	case *D:
		return *d, nil
	case nil:
		var zero D
		return zero, nil
	}
	var zero D
	return zero, fmt.Errorf("verb %s: a %T document, not a %s", name, in.Doc, reflect.TypeFor[D]())
}

// decodeCommand reads a command's document as proposed.
func decodeCommand[D any](doc []byte) (D, error) {
	var d D
	if err := json.Unmarshal(doc, &d); err != nil {
		return d, fmt.Errorf("verb: decode command document: %w", err)
	}
	return d, nil
}

// write is a write whose document D is all it takes: m runs it.
func write[D any, R result](v Verb, m func(service.Service, context.Context, service.Call, D) (R, error)) Verb {
	v.Request, v.Response = reflect.TypeFor[D](), reflect.TypeFor[R]()
	v.Call = func(ctx context.Context, svc service.Service, c service.Call, in Input) (service.Doc, error) {
		d, err := docIn[D](v.Name, in)
		if err != nil {
			return service.Doc{}, err
		}
		r, err := m(svc, ctx, c, d)
		return r.Document(), err
	}
	if v.Command != "" {
		v.Apply = func(ctx context.Context, svc service.Service, c service.Call, raw []byte) (any, error) {
			d, err := decodeCommand[D](raw)
			if err != nil {
				return nil, err
			}
			return m(svc, ctx, c, d)
		}
	}
	return v
}

// writeOn is a write that takes, beside its document D, what its path
// names (an expectation's id, a task): its command document is an OnPath.
func writeOn[D any, R result](v Verb, m func(service.Service, context.Context, service.Call, string, D) (R, error)) Verb {
	v.Request, v.Response = reflect.TypeFor[D](), reflect.TypeFor[R]()
	v.Call = func(ctx context.Context, svc service.Service, c service.Call, in Input) (service.Doc, error) {
		d, err := docIn[D](v.Name, in)
		if err != nil {
			return service.Doc{}, err
		}
		r, err := m(svc, ctx, c, in.arg(0), d)
		return r.Document(), err
	}
	v.Apply = func(ctx context.Context, svc service.Service, c service.Call, raw []byte) (any, error) {
		d, err := decodeCommand[OnPath[D]](raw)
		if err != nil {
			return nil, err
		}
		return m(svc, ctx, c, d.Path, d.Doc)
	}
	return v
}

// read is a read whose request D (a query, or a reference the path
// fills) becomes what the method takes by arg, which may read the Call
// (whose seat a list of owed promises is).
func read[D, A any, R result](v Verb, arg func(d D, c service.Call) (A, error), m func(service.Service, context.Context, service.Call, A) (R, error)) Verb {
	v.Request, v.Response = reflect.TypeFor[D](), reflect.TypeFor[R]()
	v.Call = func(ctx context.Context, svc service.Service, c service.Call, in Input) (service.Doc, error) {
		d, err := docIn[D](v.Name, in)
		if err != nil {
			return service.Doc{}, err
		}
		a, err := arg(d, c)
		if err != nil {
			return service.Doc{}, err
		}
		r, err := m(svc, ctx, c, a)
		return r.Document(), err
	}
	return v
}

// query is a read's argument that is its request, as D reads it.
func query[D, A any](f func(D) A) func(D, service.Call) (A, error) {
	return func(d D, _ service.Call) (A, error) { return f(d), nil }
}
