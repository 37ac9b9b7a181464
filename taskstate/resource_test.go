package taskstate_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

func TestTemplateMatch(t *testing.T) {
	for _, c := range []struct {
		tmpl, uri string
		want      map[string]string // nil: no match
	}{
		{"test://template/{id}/data", "test://template/123/data", map[string]string{"id": "123"}},
		{"test://template/{id}/data", "test://template/1/2/data", nil},
		{"test://template/{id}/data", "test://template//data", nil},
		{"test://template/{id}/data", "test://template/123/data/x", nil},
		{"test://template/{id}/data", "test://other/123/data", nil},
		{"test://template/{id}", "test://template/a%20b", map[string]string{"id": "a b"}},
		{"file:///{+path}", "file:///etc/hosts", map[string]string{"path": "etc/hosts"}},
		{"repo://{owner}/{name}/{+path}", "repo://me/mcpq/a/b.go", map[string]string{"owner": "me", "name": "mcpq", "path": "a/b.go"}},
		{"doc://{name}{#section}", "doc://intro#usage", map[string]string{"name": "intro", "section": "usage"}},
		{"test://fixed", "test://fixed", map[string]string{}},
	} {
		tp, err := taskstate.ParseTemplate(c.tmpl)
		if err != nil {
			t.Fatalf("ParseTemplate(%q): %v", c.tmpl, err)
		}
		got, ok := tp.Match(c.uri)
		if ok != (c.want != nil) || ok && !maps.Equal(got, c.want) {
			t.Errorf("%q.Match(%q) = %v, %v; want %v", c.tmpl, c.uri, got, ok, c.want)
		}
	}
}

func TestParseTemplateRefuses(t *testing.T) {
	for tmpl, why := range map[string]string{
		"":                   "empty",
		"test://{id":         "unclosed",
		"test://id}":         "unmatched",
		"test://{?q}":        "not supported",
		"test://{a,b}":       "invalid variable name",
		"test://{a}/{a}":     "twice",
		"test://{a}{b}":      "not separated",
		"test://{}/x":        "invalid variable name",
		"test://{/segments}": "not supported",
	} {
		_, err := taskstate.ParseTemplate(tmpl)
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ParseTemplate(%q) = %v; want an error saying %q", tmpl, err, why)
		}
	}
}

func TestCheckResourceURI(t *testing.T) {
	for _, ok := range []string{"test://static-text", "file:///etc/hosts", "https://example.com/a?b=c"} {
		if err := taskstate.CheckResourceURI(ok); err != nil {
			t.Errorf("CheckResourceURI(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "no-scheme", "test://a b", "test://a\nb", strings.Repeat("x", 2049)} {
		if err := taskstate.CheckResourceURI(bad); err == nil {
			t.Errorf("CheckResourceURI(%q) accepted", bad)
		}
	}
}
