package sitelink

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// spec is openapi.yaml, decoded as JSON would be (yaml -> any -> JSON -> any).
func spec(t *testing.T) map[string]any {
	t.Helper()
	var y any
	if err := yaml.Unmarshal(OpenAPI, &y); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(y)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// at walks a decoded document by keys.
func at(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func refName(v any) string {
	r, _ := at(v, "$ref").(string)
	return strings.TrimPrefix(r, "#/components/schemas/")
}

// TestSpecOperations: every operation the Handler serves is in the specification as a POST
// with its operationId, the Go types' names as its request and 200 schemas, and exactly the
// statuses the Handler can answer; and the specification has no other path.
func TestSpecOperations(t *testing.T) {
	doc := spec(t)
	paths, _ := doc["paths"].(map[string]any)
	var served []string
	for _, op := range operations {
		served = append(served, op.path)
		t.Run(op.id, func(t *testing.T) {
			p, _ := paths[op.path].(map[string]any)
			if p == nil || len(p) != 1 || p["post"] == nil {
				t.Fatalf("spec path %s: %v, want exactly a post", op.path, p)
			}
			post := p["post"]
			if got := at(post, "operationId"); got != op.id {
				t.Errorf("operationId %v, want %s", got, op.id)
			}
			if got, want := refName(at(post, "requestBody", "content", ContentType, "schema")), typeName(op.request); got != want {
				t.Errorf("request schema %q, want %q", got, want)
			}
			if got, want := refName(at(post, "responses", "200", "content", ContentType, "schema")), typeName(op.resp); got != want {
				t.Errorf("200 schema %q, want %q", got, want)
			}
			var codes []int
			for k := range at(post, "responses").(map[string]any) {
				n, err := strconv.Atoi(k)
				if err != nil {
					t.Fatalf("response key %q", k)
				}
				if n != http.StatusOK {
					codes = append(codes, n)
				}
			}
			sort.Ints(codes)
			if diff := cmp.Diff(op.statuses, codes); diff != "" {
				t.Errorf("error statuses (-handler +spec):\n%s", diff)
			}
		})
	}
	var inSpec []string
	for p := range paths {
		inSpec = append(inSpec, p)
	}
	slices.Sort(served)
	slices.Sort(inSpec)
	if diff := cmp.Diff(served, inSpec); diff != "" {
		t.Errorf("paths (-handler +spec):\n%s", diff)
	}
}

func typeName(v any) string { return reflect.TypeOf(v).Name() }

// TestSpecSchemas: every message type reachable from the operations (and Error) has a
// schema of its name whose properties are the JSON keys Go writes, whose required list is
// the keys Go always writes, and whose property types match the Go fields'; and the
// specification has no schema beyond those.
func TestSpecSchemas(t *testing.T) {
	doc := spec(t)
	schemas, _ := at(doc, "components", "schemas").(map[string]any)
	seen := map[string]reflect.Type{}
	var visit func(reflect.Type)
	visit = func(rt reflect.Type) {
		if _, ok := seen[rt.Name()]; ok {
			return
		}
		seen[rt.Name()] = rt
		for _, f := range fields(rt) {
			for ft := f.typ; ; {
				switch ft.Kind() {
				case reflect.Pointer, reflect.Slice, reflect.Map:
					ft = ft.Elem()
					continue
				case reflect.Struct:
					if ft != timeType && !ft.Implements(textMarshaler) {
						visit(ft)
					}
				}
				break
			}
		}
		for i := range rt.NumField() {
			if f := rt.Field(i); f.Anonymous {
				visit(f.Type)
			}
		}
	}
	for _, op := range operations {
		visit(reflect.TypeOf(op.request))
		visit(reflect.TypeOf(op.resp))
	}
	visit(reflect.TypeOf(Error{}))
	var goNames, specNames []string
	for n := range seen {
		goNames = append(goNames, n)
	}
	for n := range schemas {
		specNames = append(specNames, n)
	}
	slices.Sort(goNames)
	slices.Sort(specNames)
	if diff := cmp.Diff(goNames, specNames); diff != "" {
		t.Errorf("schemas (-go +spec):\n%s", diff)
	}
	for name, rt := range seen {
		t.Run(name, func(t *testing.T) {
			props, required := flatten(t, schemas, schemas[name])
			var wantRequired []string
			wantProps := map[string]bool{}
			for _, f := range fields(rt) {
				wantProps[f.key] = true
				if !f.omitempty {
					wantRequired = append(wantRequired, f.key)
				}
				p, ok := props[f.key]
				if !ok {
					t.Errorf("property %q missing", f.key)
					continue
				}
				if err := matches(f.typ, p, !f.omitempty); err != nil {
					t.Errorf("property %q: %v", f.key, err)
				}
			}
			for k := range props {
				if !wantProps[k] {
					t.Errorf("property %q has no Go field", k)
				}
			}
			slices.Sort(wantRequired)
			slices.Sort(required)
			if diff := cmp.Diff(wantRequired, required, cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })); diff != "" {
				t.Errorf("required (-go +spec):\n%s", diff)
			}
		})
	}
}

var (
	timeType      = reflect.TypeFor[time.Time]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

type field struct {
	key       string
	typ       reflect.Type
	omitempty bool
}

// fields lists a struct's JSON fields as encoding/json sees them, embedded structs inline.
func fields(rt reflect.Type) []field {
	var out []field
	for i := range rt.NumField() {
		f := rt.Field(i)
		if f.Anonymous && f.Tag.Get("json") == "" {
			out = append(out, fields(f.Type)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, field{key: name, typ: f.Type, omitempty: strings.Contains(opts, "omitempty")})
	}
	return out
}

// flatten returns a schema's properties and required keys, following $ref and allOf.
func flatten(t *testing.T, schemas map[string]any, s any) (map[string]any, []string) {
	t.Helper()
	if n := refName(s); n != "" {
		return flatten(t, schemas, schemas[n])
	}
	props := map[string]any{}
	var req []string
	if all, ok := at(s, "allOf").([]any); ok {
		for _, part := range all {
			p, r := flatten(t, schemas, part)
			for k, v := range p {
				props[k] = v
			}
			req = append(req, r...)
		}
	}
	if p, ok := at(s, "properties").(map[string]any); ok {
		for k, v := range p {
			props[k] = v
		}
	}
	if r, ok := at(s, "required").([]any); ok {
		for _, k := range r {
			req = append(req, k.(string))
		}
	}
	return props, req
}

// matches checks a property schema against a Go field type. always: Go writes the field
// even when empty (a nil slice then is null).
func matches(rt reflect.Type, p any, always bool) error {
	typ := at(p, "type")
	switch {
	case rt == timeType:
		if typ != "string" || at(p, "format") != "date-time" {
			return fmt.Errorf("time: want string date-time, spec %v", p)
		}
	case rt.Implements(textMarshaler):
		if typ != "string" {
			return fmt.Errorf("%s: want string, spec %v", rt, p)
		}
	case rt.Kind() == reflect.Pointer:
		return matches(rt.Elem(), p, false)
	case rt.Kind() == reflect.Struct:
		if refName(p) != rt.Name() {
			return fmt.Errorf("want $ref %s, spec %v", rt.Name(), p)
		}
	case rt.Kind() == reflect.Slice:
		want := any("array")
		if always {
			want = []any{"array", "null"}
		}
		if !reflect.DeepEqual(typ, want) {
			return fmt.Errorf("want type %v, spec %v", want, typ)
		}
		return matches(rt.Elem(), at(p, "items"), false)
	case rt.Kind() == reflect.Map:
		if typ != "object" {
			return fmt.Errorf("map: want object, spec %v", p)
		}
		return matches(rt.Elem(), at(p, "additionalProperties"), false)
	case rt.Kind() == reflect.String:
		if typ != "string" {
			return fmt.Errorf("want string, spec %v", typ)
		}
	case rt.Kind() == reflect.Bool:
		if typ != "boolean" {
			return fmt.Errorf("want boolean, spec %v", typ)
		}
	case rt.Kind() >= reflect.Int && rt.Kind() <= reflect.Uint64:
		if typ != "integer" {
			return fmt.Errorf("want integer, spec %v", typ)
		}
	default:
		return fmt.Errorf("no rule for %s", rt)
	}
	return nil
}

// TestSpecExamples: every example in the specification decodes into its Go type with
// unknown fields refused, and encodes back to the same JSON.
func TestSpecExamples(t *testing.T) {
	doc := spec(t)
	check := func(name string, ex any, into any) {
		t.Run(name, func(t *testing.T) {
			if ex == nil {
				t.Fatal("no example")
			}
			b, _ := json.Marshal(ex)
			v := reflect.New(reflect.TypeOf(into))
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(v.Interface()); err != nil {
				t.Fatalf("decode %s: %v", b, err)
			}
			back, err := json.Marshal(v.Elem().Interface())
			if err != nil {
				t.Fatal(err)
			}
			var got any
			json.Unmarshal(back, &got)
			if diff := cmp.Diff(ex, got); diff != "" {
				t.Errorf("example and its Go round trip differ (-spec +go):\n%s", diff)
			}
		})
	}
	for _, op := range operations {
		post := at(doc, "paths", op.path, "post")
		check(op.id+"/request", at(post, "requestBody", "content", ContentType, "example"), op.request)
		check(op.id+"/200", at(post, "responses", "200", "content", ContentType, "example"), op.resp)
	}
	for name, r := range at(doc, "components", "responses").(map[string]any) {
		check("responses/"+name, at(r, "content", ContentType, "example"), Error{})
	}
}
