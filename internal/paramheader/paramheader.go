// Package paramheader owns the SEP-2243 rule for tool parameters mirrored
// into HTTP headers: a property of a tool's input schema marked
// "x-mcp-header": "<Name>" travels, on the 2026-07-28 Streamable HTTP wire,
// as the header Mcp-Param-<Name> beside the body. The worker library marks
// the schema from struct tags (Tag) and checks the marks at registration
// (Params); the front end reads them (Params) and checks each tools/call's
// headers against its arguments (Check) before anything is enqueued.
package paramheader

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Keyword is the schema annotation; HeaderPrefix starts the header's name.
const (
	Keyword      = "x-mcp-header"
	HeaderPrefix = "Mcp-Param-"
	// TagKey is the struct tag naming a field's header: `mcpheader:"Region"`.
	TagKey = "mcpheader"
)

// Param is one parameter mirrored into a header.
type Param struct {
	// Header is the x-mcp-header value: the header is HeaderPrefix+Header.
	Header string
	// Path is the chain of property names from the schema root.
	Path []string
}

// maxSafeInt is JavaScript's Number.MAX_SAFE_INTEGER (2^53 − 1).
const maxSafeInt = 1<<53 - 1

// Params returns the parameters schema marks, sorted as found (a
// depth-first walk of properties in key order), or why a mark is invalid:
// an empty name or one that is not an HTTP token, two names equal but for
// case, a mark on a property whose type is not string, integer or boolean,
// or a mark not reachable from the root through properties alone (under
// items, oneOf, anyOf, allOf, not, if/then/else, $defs, …).
func Params(schema json.RawMessage) ([]Param, error) {
	if len(schema) == 0 {
		return nil, nil
	}
	var root map[string]any
	if err := json.Unmarshal(schema, &root); err != nil {
		return nil, fmt.Errorf("paramheader: input schema: %w", err)
	}
	var out []Param
	seen := map[string]string{}
	var walk func(node map[string]any, path []string, reachable bool) error
	walk = func(node map[string]any, path []string, reachable bool) error {
		for _, k := range sortedKeys(node) {
			v := node[k]
			switch k {
			case Keyword:
				where := "/" + strings.Join(path, "/")
				if !reachable || len(path) == 0 {
					return fmt.Errorf("paramheader: %s at %s: only a property reached from the root through \"properties\" alone may carry it", Keyword, where)
				}
				name, ok := v.(string)
				if !ok || !isToken(name) {
					return fmt.Errorf("paramheader: %s of %s: %v is not an HTTP header name token (letters, digits, !#$%%&'*+-.^_`|~)", Keyword, where, v)
				}
				if prev, dup := seen[strings.ToLower(name)]; dup {
					return fmt.Errorf("paramheader: %s %q of %s repeats that of %s (names are case-insensitive)", Keyword, name, where, prev)
				}
				if t := primitiveType(node["type"]); t == "" {
					return fmt.Errorf("paramheader: %s of %s: the property's type must be string, integer or boolean, not %v", Keyword, where, node["type"])
				}
				seen[strings.ToLower(name)] = where
				out = append(out, Param{Header: name, Path: append([]string(nil), path...)})
			case "properties":
				props, _ := v.(map[string]any)
				for _, name := range sortedKeys(props) {
					if sub, ok := props[name].(map[string]any); ok {
						if err := walk(sub, append(path, name), reachable); err != nil {
							return err
						}
					}
				}
			default:
				if err := walkAny(v, func(sub map[string]any) error { return walk(sub, path, false) }); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(root, nil, true); err != nil {
		return nil, err
	}
	return out, nil
}

// walkAny calls fn on every object inside v (v itself, array items).
func walkAny(v any, fn func(map[string]any) error) error {
	switch x := v.(type) {
	case map[string]any:
		return fn(x)
	case []any:
		for _, e := range x {
			if err := walkAny(e, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// sortedKeys makes the walk, and so errors and order, deterministic.
func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// primitiveType is the type a mark may sit on ("string", "integer",
// "boolean"), alone or with "null"; "" otherwise.
func primitiveType(t any) string {
	var types []string
	switch x := t.(type) {
	case string:
		types = []string{x}
	case []any:
		for _, e := range x {
			if s, ok := e.(string); ok && s != "null" {
				types = append(types, s)
			}
		}
	}
	if len(types) != 1 {
		return ""
	}
	switch types[0] {
	case "string", "integer", "boolean":
		return types[0]
	}
	return ""
}

// isToken reports whether s is an RFC 9110 token (1*tchar).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// Tag marks, in schema (inferred from t, a struct type or a pointer to one),
// the property of every field tagged `mcpheader:"Name"` with x-mcp-header
// Name, following nested struct fields as nested properties. It fails for a
// tag on a field the schema has no property for, and for marks Params
// refuses.
func Tag(schema json.RawMessage, t reflect.Type) (json.RawMessage, error) {
	var root map[string]any
	if err := json.Unmarshal(schema, &root); err != nil {
		return nil, fmt.Errorf("paramheader: schema: %w", err)
	}
	n, err := tag(root, t, nil)
	if err != nil || n == 0 {
		return schema, err
	}
	out, err := json.Marshal(root)
	if err != nil {
		return nil, fmt.Errorf("paramheader: schema: %w", err)
	}
	if _, err := Params(out); err != nil {
		return nil, err
	}
	return out, nil
}

func tag(node map[string]any, t reflect.Type, path []string) (int, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return 0, nil
	}
	props, _ := node["properties"].(map[string]any)
	n := 0
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := f.Name
		if j := f.Tag.Get("json"); j != "" {
			if j == "-" {
				continue
			}
			if base, _, _ := strings.Cut(j, ","); base != "" {
				name = base
			}
		}
		if f.Anonymous && f.Tag.Get("json") == "" {
			m, err := tag(node, f.Type, path) // embedded: its fields are the parent's
			if err != nil {
				return 0, err
			}
			n += m
			continue
		}
		h, tagged := f.Tag.Lookup(TagKey)
		prop, _ := props[name].(map[string]any)
		if tagged {
			if prop == nil {
				return 0, fmt.Errorf("paramheader: field %s (tag %s:%q): the schema has no property /%s", f.Name, TagKey, h, strings.Join(append(path, name), "/"))
			}
			prop[Keyword] = h
			n++
		}
		if prop != nil {
			m, err := tag(prop, f.Type, append(path, name))
			if err != nil {
				return 0, err
			}
			n += m
		}
	}
	return n, nil
}

// Decode undoes the value encoding of a header value: "=?base64?…?=" is
// standard base64 (padded, strict) of UTF-8 text; anything else is the
// value itself. A value holding characters a header may not (outside
// visible ASCII, space and tab) or a sentinel whose content is not valid
// base64 of UTF-8 is an error.
func Decode(v string) (string, error) {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 || c > 0x7e) && c != '\t' {
			return "", fmt.Errorf("holds a character outside visible ASCII (byte 0x%02x): non-ASCII values travel as =?base64?…?=", c)
		}
	}
	inner, ok := strings.CutPrefix(v, "=?base64?")
	if !ok {
		return v, nil
	}
	if inner, ok = strings.CutSuffix(inner, "?="); !ok {
		return v, nil // no sentinel: a literal value
	}
	b, err := base64.StdEncoding.Strict().DecodeString(inner)
	if err != nil {
		return "", fmt.Errorf("is not valid base64 (padded, standard alphabet) inside =?base64?…?=")
	}
	if !utf8.Valid(b) {
		return "", errors.New("decodes to bytes that are not UTF-8")
	}
	return string(b), nil
}

// Check compares a parameter's header values (nil: no header) with the
// call's arguments, and says what disagrees: a header for a value the
// arguments lack (or hold as null), a value in the arguments without its
// header, an undecodable header, or values that differ (integers compare as
// numbers, booleans as "true"/"false").
func Check(p Param, args map[string]any, values []string) error {
	header := HeaderPrefix + p.Header
	body, present := lookup(args, p.Path)
	if present && body == nil {
		present = false // null: the client omits the header
	}
	switch {
	case !present && len(values) == 0:
		return nil
	case !present:
		return fmt.Errorf("%s header sent, but arguments.%s is absent or null", header, strings.Join(p.Path, "."))
	case len(values) == 0:
		return fmt.Errorf("missing %s header: arguments.%s is set, and its value must be mirrored in that header", header, strings.Join(p.Path, "."))
	}
	got, err := Decode(values[0])
	if err != nil {
		return fmt.Errorf("%s header %w", header, err)
	}
	for _, v := range values[1:] {
		if d, err := Decode(v); err != nil || d != got {
			return fmt.Errorf("conflicting %s headers", header)
		}
	}
	if !equal(got, body) {
		return fmt.Errorf("%s header %q does not match arguments.%s %s", header, clip(got), strings.Join(p.Path, "."), clip(fmt.Sprint(jsonText(body))))
	}
	return nil
}

func lookup(args map[string]any, path []string) (any, bool) {
	var cur any = args
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// equal compares a decoded header value with a body value decoded with
// json.Decoder.UseNumber.
func equal(h string, body any) bool {
	switch b := body.(type) {
	case string:
		return h == b
	case bool:
		return h == strconv.FormatBool(b)
	case json.Number:
		hv, err1 := strconv.ParseFloat(h, 64)
		bv, err2 := b.Float64()
		return err1 == nil && err2 == nil && hv == bv && hv >= -maxSafeInt && hv <= maxSafeInt
	case float64:
		hv, err := strconv.ParseFloat(h, 64)
		return err == nil && hv == b
	}
	return false // objects and arrays are never mirrored
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// clip bounds a value echoed in an error message (64 bytes, then "…").
func clip(s string) string {
	if len(s) > 64 {
		s = strings.ToValidUTF8(s[:64], "") + "…"
	}
	return s
}
