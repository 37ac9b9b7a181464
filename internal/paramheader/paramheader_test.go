package paramheader_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mcpqueue/mcpqueue/internal/paramheader"
)

type where struct {
	Zone string `json:"zone" mcpheader:"Zone"`
}

type sqlArgs struct {
	Region string `json:"region" mcpheader:"Region"`
	Query  string `json:"query"`
	Shard  int    `json:"shard,omitempty" mcpheader:"Shard"`
	DryRun bool   `json:"dry_run,omitempty" mcpheader:"Dry-Run"`
	Where  where  `json:"where"`
}

func TestTagMarksTaggedFields(t *testing.T) {
	s, err := jsonschema.For[sqlArgs](nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(s)
	out, err := paramheader.Tag(raw, reflect.TypeFor[sqlArgs]())
	if err != nil {
		t.Fatal(err)
	}
	params, err := paramheader.Params(out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range params {
		got[p.Header] = strings.Join(p.Path, ".")
	}
	want := map[string]string{"Region": "region", "Shard": "shard", "Dry-Run": "dry_run", "Zone": "where.zone"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("params = %v, want %v (schema %s)", got, want, out)
	}
}

func TestTagRefuses(t *testing.T) {
	type number struct {
		Ratio float64 `json:"ratio" mcpheader:"Ratio"`
	}
	type badName struct {
		A string `json:"a" mcpheader:"Bad Name"`
	}
	type dup struct {
		A string `json:"a" mcpheader:"Region"`
		B string `json:"b" mcpheader:"region"`
	}
	type list struct {
		L []string `json:"l" mcpheader:"L"`
	}
	for name, c := range map[string]struct {
		typ  reflect.Type
		want string
	}{
		"number":   {reflect.TypeFor[number](), "must be string, integer or boolean"},
		"bad name": {reflect.TypeFor[badName](), "not an HTTP header name token"},
		"dup":      {reflect.TypeFor[dup](), "case-insensitive"},
		"array":    {reflect.TypeFor[list](), "must be string, integer or boolean"},
	} {
		s, err := jsonschema.ForType(c.typ, nil)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(s)
		if _, err := paramheader.Tag(raw, c.typ); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Tag = %v, want an error saying %q", name, err, c.want)
		}
	}
}

func TestParamsRefusesUnreachableMarks(t *testing.T) {
	for name, schema := range map[string]string{
		"items": `{"type":"object","properties":{"l":{"type":"array","items":{"type":"string","x-mcp-header":"L"}}}}`,
		"oneOf": `{"type":"object","oneOf":[{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}]}`,
		"root":  `{"type":"object","x-mcp-header":"Root"}`,
		"$defs": `{"type":"object","$defs":{"a":{"type":"string","x-mcp-header":"A"}}}`,
	} {
		if _, err := paramheader.Params(json.RawMessage(schema)); err == nil || !strings.Contains(err.Error(), "through \"properties\" alone") {
			t.Errorf("%s: Params = %v, want the reachability error", name, err)
		}
	}
	if p, err := paramheader.Params(json.RawMessage(`{"type":"object","properties":{"a":{"type":["string","null"],"x-mcp-header":"A"}}}`)); err != nil || len(p) != 1 {
		t.Errorf("nullable string: %v, %v", p, err)
	}
}

func TestDecode(t *testing.T) {
	for in, want := range map[string]string{
		"us-west1":                            "us-west1",
		"=?base64?SGVsbG8=?=":                 "Hello",
		"=?base64?SGVsbG8sIOS4lueVjA==?=":     "Hello, 世界",
		"SGVsbG8=":                            "SGVsbG8=",           // no sentinel: literal
		"=?base64?SGVsbG8=":                   "=?base64?SGVsbG8=",  // no suffix: literal
		"=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=": "=?base64?literal?=", // an encoded sentinel
	} {
		got, err := paramheader.Decode(in)
		if err != nil || got != want {
			t.Errorf("Decode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"=?base64?SGVsbG8?=", "=?base64?SGVs!!!bG8=?=", "caf\xc3\xa9", "=?base64?/w==?="} {
		if got, err := paramheader.Decode(bad); err == nil {
			t.Errorf("Decode(%q) = %q, want an error", bad, got)
		}
	}
}

func TestCheck(t *testing.T) {
	args := func(s string) map[string]any {
		d := json.NewDecoder(bytes.NewReader([]byte(s)))
		d.UseNumber()
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	region := paramheader.Param{Header: "Region", Path: []string{"region"}}
	shard := paramheader.Param{Header: "Shard", Path: []string{"shard"}}
	flag := paramheader.Param{Header: "Flag", Path: []string{"opts", "flag"}}
	for _, c := range []struct {
		p      paramheader.Param
		args   string
		values []string
		ok     bool
	}{
		{region, `{"region":"us-west1"}`, []string{"us-west1"}, true},
		{region, `{"region":"Hello"}`, []string{"=?base64?SGVsbG8=?="}, true},
		{region, `{"region":"us-west1"}`, []string{"eu-west1"}, false},
		{region, `{"region":"us-west1"}`, nil, false},
		{region, `{}`, nil, true},
		{region, `{"region":null}`, nil, true},
		{region, `{}`, []string{"us-west1"}, false},
		{region, `{"region":"a"}`, []string{"a", "b"}, false},
		{region, `{"region":"Hello"}`, []string{"=?base64?SGVsbG8?="}, false},
		{shard, `{"shard":42}`, []string{"42"}, true},
		{shard, `{"shard":42}`, []string{"42.0"}, true},
		{shard, `{"shard":42}`, []string{"43"}, false},
		{shard, `{"shard":"42"}`, []string{"42"}, true}, // a string is compared as one (the schema refuses it later)
		{flag, `{"opts":{"flag":true}}`, []string{"true"}, true},
		{flag, `{"opts":{"flag":true}}`, []string{"True"}, false},
	} {
		err := paramheader.Check(c.p, args(c.args), c.values)
		if (err == nil) != c.ok {
			t.Errorf("Check(%s, %s, %q) = %v; want ok=%v", c.p.Header, c.args, c.values, err, c.ok)
		}
	}
}
