package taskstate

import (
	"fmt"
	"net/url"
	"strings"
)

// Kinds of catalog entries besides tools and prompts. A resource's and a
// template's entry is named by its URI (ToolInfo.Name), so its catalog key —
// and the route of its jobs — is "resource/<uri>" or "template/<uri
// template>"; its MCP name is ToolInfo.ResourceName. A completion entry is
// registered beside the prompt or template whose arguments it completes and
// named by that entry's key: "completion/prompt/<name>",
// "completion/template/<uri template>".
const (
	KindResource   = "resource"   // a resource: resources/list, resources/read
	KindTemplate   = "template"   // a resource template: resources/templates/list, resources/read
	KindCompletion = "completion" // completion/complete for a prompt's or template's arguments
)

// CompletionKey is the catalog key of the completion entry of the entry
// with key ref ("prompt/<name>" or "template/<uri template>").
func CompletionKey(ref string) string { return CatalogKey(KindCompletion, ref) }

// CheckResourceURI reports why uri cannot name a resource: empty, over 2048
// bytes, holding control characters or spaces, or without a scheme.
func CheckResourceURI(uri string) error {
	if uri == "" {
		return fmt.Errorf("empty resource URI")
	}
	if len(uri) > 2048 {
		return fmt.Errorf("resource URI longer than 2048 bytes")
	}
	for i := 0; i < len(uri); i++ {
		if c := uri[i]; c <= ' ' || c == 0x7f {
			return fmt.Errorf("resource URI %q holds a control character or a space", uri)
		}
	}
	u, err := url.Parse(uri)
	if err != nil || u.Scheme == "" {
		return fmt.Errorf("resource URI %q has no scheme (like file:// or test://)", uri)
	}
	return nil
}

// Template is a parsed RFC 6570 URI template of the forms resource
// templates use: literal text with simple expansions {name} (a value
// without '/', '?', '#' or ','), reserved expansions {+name} (any value)
// and fragment expansions {#name}. Other operators are refused by
// ParseTemplate.
type Template struct {
	raw   string
	parts []tmplPart
}

type tmplPart struct {
	lit      string // literal text, when name is ""
	name     string
	reserved bool // {+name} or {#name}: may hold '/', '?' and so on
}

// ParseTemplate parses a URI template (see Template).
func ParseTemplate(s string) (*Template, error) {
	if s == "" {
		return nil, fmt.Errorf("empty URI template")
	}
	t := &Template{raw: s}
	seen := map[string]bool{}
	rest := s
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if closeAt := strings.IndexByte(rest, '}'); closeAt >= 0 && (open < 0 || closeAt < open) {
			return nil, fmt.Errorf("URI template %q: unmatched '}'", s)
		}
		if open < 0 {
			t.parts = append(t.parts, tmplPart{lit: rest})
			break
		}
		if open > 0 {
			t.parts = append(t.parts, tmplPart{lit: rest[:open]})
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf("URI template %q: unclosed '{'", s)
		}
		expr := rest[open+1 : open+end]
		rest = rest[open+end+1:]
		p := tmplPart{}
		switch {
		case strings.HasPrefix(expr, "+"):
			p.reserved, expr = true, expr[1:]
		case strings.HasPrefix(expr, "#"):
			p.reserved, expr = true, expr[1:]
			t.parts = append(t.parts, tmplPart{lit: "#"})
		case expr != "" && strings.ContainsRune("./;?&=,!@|", rune(expr[0])):
			return nil, fmt.Errorf("URI template %q: operator %q is not supported (use {name}, {+name} or {#name})", s, expr[:1])
		}
		if !validVarName(expr) {
			return nil, fmt.Errorf("URI template %q: invalid variable name %q (one name of letters, digits and '_' per expression)", s, expr)
		}
		if seen[expr] {
			return nil, fmt.Errorf("URI template %q: variable %q appears twice", s, expr)
		}
		seen[expr] = true
		if n := len(t.parts); n > 0 && t.parts[n-1].name != "" {
			return nil, fmt.Errorf("URI template %q: expressions {%s} and {%s} are not separated by literal text", s, t.parts[n-1].name, expr)
		}
		p.name = expr
		t.parts = append(t.parts, p)
	}
	return t, nil
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// String is the template as written.
func (t *Template) String() string { return t.raw }

// Vars lists the template's variables in order.
func (t *Template) Vars() []string {
	var out []string
	for _, p := range t.parts {
		if p.name != "" {
			out = append(out, p.name)
		}
	}
	return out
}

// Match reports whether uri is an expansion of the template, and the values
// of its variables (percent-decoded). Every variable matches at least one
// character; a simple expansion stops at the literal text that follows it
// (the first occurrence), a reserved one at its last occurrence.
func (t *Template) Match(uri string) (map[string]string, bool) {
	vars := map[string]string{}
	rest := uri
	for i, p := range t.parts {
		if p.name == "" {
			var ok bool
			if rest, ok = strings.CutPrefix(rest, p.lit); !ok {
				return nil, false
			}
			continue
		}
		var raw string
		if i+1 == len(t.parts) {
			raw, rest = rest, ""
		} else {
			next := t.parts[i+1].lit
			var at int
			if p.reserved {
				at = strings.LastIndex(rest, next)
			} else {
				at = strings.Index(rest, next)
			}
			if at < 0 {
				return nil, false
			}
			raw, rest = rest[:at], rest[at:]
		}
		if raw == "" || !p.reserved && strings.ContainsAny(raw, "/?#,") {
			return nil, false
		}
		v, err := url.PathUnescape(raw)
		if err != nil {
			return nil, false
		}
		vars[p.name] = v
	}
	if rest != "" {
		return nil, false
	}
	return vars, true
}
