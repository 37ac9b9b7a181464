package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// The slots of testSchema, the shape of an MCP request.
const (
	slotJSONRPC = iota
	slotID
	slotMethod
	slotParams
	slotName
	slotURI
	slotArgs
	slotInputs
	slotMeta
	slotProgress
	slots
)

var testSchema = NewSchema(&Object{
	Fold:   true,
	Fields: []string{"jsonrpc", "id", "method", "params", "result", "error"},
	Members: []Member{
		{Name: "jsonrpc", Slot: slotJSONRPC},
		{Name: "id", Slot: slotID},
		{Name: "method", Slot: slotMethod},
		{Name: "params", Slot: slotParams, Object: &Object{
			Fold:   true,
			Fields: []string{"_meta", "name", "arguments", "inputResponses", "requestState", "taskId", "cursor", "task", "protocolVersion", "capabilities", "clientInfo", "level"},
			Members: []Member{
				{Name: "name", Slot: slotName},
				{Name: "uri", Slot: slotURI}, // no field: found under any case
				{Name: "arguments", Slot: slotArgs, Object: &Object{Fold: true}},
				{Name: "inputResponses", Slot: slotInputs},
				{Name: "_meta", Slot: slotMeta, Object: &Object{Members: []Member{{Name: "progressToken", Slot: slotProgress}}}},
			},
		}},
	},
})

// message is the refusal as a reader sees it.
func message(e *Error) string {
	if e.Path == "" {
		return e.What
	}
	return e.What + " in " + e.Path
}

func TestCheck(t *testing.T) {
	const valid = `{"jsonrpc":"2.0","id":"r1","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"inputResponses":{"a":{},"b":{}},"_meta":{"k":1}}}`
	deep := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	many := func(prefix string, n int, last string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			b.WriteString(`"` + prefix + strings.Repeat("x", i) + `":0,`)
		}
		b.WriteString(`"` + last + `":0}`)
		return b.String()
	}
	const (
		syntax  = 1
		invalid = 2
	)
	for _, c := range []struct {
		name, body string
		code       int    // 0: accepted
		msg        string // a part of the message
	}{
		{name: "valid request", body: valid},
		{name: "scalars and escapes", body: `{"a":[1,-0.5e+3,true,false,null,"\u00e9\n\"\\\/",{}],"b":[]}`},
		{name: "_meta keys are case sensitive", body: `{"params":{"_meta":{"k":1,"K":2}}}`},
		{name: "nested argument keys are case sensitive", body: `{"params":{"arguments":{"m":{"k":1,"K":2}}}}`},
		{name: "invalid UTF-8 in a value", body: "{\"a\":\"\xff\xfe\"}"},
		{name: "depth at the limit", body: deep(64)},

		{name: "empty", body: ``, code: syntax, msg: "empty body"},
		{name: "truncated", body: valid[:40], code: syntax},
		{name: "trailing data", body: valid + `{}`, code: syntax, msg: "data after the JSON value"},
		{name: "trailing garbage", body: valid + ` x`, code: syntax},
		{name: "bad literal", body: `{"a":tru}`, code: syntax},
		{name: "leading zero", body: `{"a":01}`, code: syntax},
		{name: "bad escape", body: `{"a":"\x"}`, code: syntax},
		{name: "short \\u escape", body: `{"a":"\u12"}`, code: syntax},
		{name: "control character in a string", body: "{\"a\":\"\x01\"}", code: syntax},
		{name: "missing colon", body: `{"a" 1}`, code: syntax},
		{name: "trailing comma", body: `{"a":1,}`, code: syntax},

		{name: "nesting past the limit", body: deep(65), code: invalid, msg: "nesting deeper than 64"},
		{name: "arrays count as nesting", body: `{"id":1,"a":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`, code: invalid, msg: "nesting deeper than 64"},
		{name: "duplicate method", body: `{"id":7,"method":"a","method":"b"}`, code: invalid, msg: `duplicate key "method"`},
		{name: "duplicate id", body: `{"id":7,"id":8,"method":"a"}`, code: invalid, msg: `duplicate key "id"`},
		{name: "duplicate in params", body: `{"id":"x","params":{"name":"a","name":"b"}}`, code: invalid, msg: `duplicate key "name" in params`},
		{name: "duplicate deep in arguments", body: `{"params":{"arguments":{"list":[{},{"k":1,"k":2}]}}}`, code: invalid, msg: `duplicate key "k" in params.arguments.list[1]`},
		{name: "duplicate spelled with an escape", body: `{"method":"a","\u006dethod":"b"}`, code: invalid, msg: `duplicate key "method"`},
		{name: "duplicate surrogate pair", body: `{"\ud83d\ude00":1,"😀":2}`, code: invalid, msg: "duplicate key"},
		{name: "lone surrogates are the same key", body: `{"\ud800":1,"\udc00":2}`, code: invalid, msg: "duplicate key"},
		{name: "invalid UTF-8 keys are the same key", body: "{\"a\xff\":1,\"a\xfe\":2}", code: invalid, msg: "duplicate key"},
		{name: "case variant of method", body: `{"method":"a","Method":"b"}`, code: invalid, msg: `key "Method" differs only in case from key "method"`},
		{name: "lone case variant of a field", body: `{"jsonrpc":"2.0","id":1,"METHOD":"tools/call"}`, code: invalid, msg: `key "METHOD" must be spelled "method"`},
		{name: "case variant of taskId in params", body: `{"params":{"taskID":"t"}}`, code: invalid, msg: `key "taskID" must be spelled "taskId" in params`},
		{name: "Kelvin sign folds to k", body: `{"params":{"tas\u212aId":"t"}}`, code: invalid, msg: `must be spelled "taskId"`},
		{name: "long s folds to s", body: `{"params":{"ta\u017fkId":"t"}}`, code: invalid, msg: `must be spelled "taskId"`},
		{name: "case variant in arguments", body: `{"params":{"arguments":{"text":"a","TEXT":"b"}}}`, code: invalid, msg: `differs only in case from key "text" in params.arguments`},
		{name: "duplicate in a big object", body: `{"params":{"_meta":` + many("k", 40, "k") + `}}`, code: invalid, msg: `duplicate key "k" in params._meta`},
		{name: "case variant in big arguments", body: `{"params":{"arguments":` + many("k", 40, "KXX") + `}}`, code: invalid, msg: "differs only in case"},
		{name: "big object without clashes", body: `{"params":{"arguments":` + many("k", 40, "z") + `}}`},
		{name: "odd keys are quoted in the path", body: `{"params":{"arguments":{"a b":{"k":1,"k":1}}}}`, code: invalid, msg: `in params.arguments["a b"]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := testSchema.Check([]byte(c.body), 64)
			ref := refCheck([]byte(c.body), 64, testSchema.root)
			switch {
			case c.code == 0 && err != nil:
				t.Fatalf("refused: %v", err)
			case c.code == 0:
				if !ref.ok {
					t.Errorf("the reference refuses it: %+v", ref)
				}
			case err == nil:
				t.Fatalf("accepted, want %d %q", c.code, c.msg)
			case err.Syntax != (c.code == syntax) || !strings.Contains(message(err), c.msg):
				t.Errorf("got %+v, want %d containing %q", err, c.code, c.msg)
			case ref.ok:
				t.Errorf("the reference accepts it")
			}
			b := []byte(c.body)
			if c.body == valid && (res.Spans[slotArgs].Len() != len(`{"text":"hi"}`) || res.Spans[slotInputs].Members != 2 || string(res.Spans[slotID].In(b)) != `"r1"`) {
				t.Errorf("result %+v", res)
			}
		})
	}
}

// refResult is what refCheck, a slow reference built on encoding/json's
// tokenizer, finds in a document.
type refResult struct {
	syntax bool // not valid JSON
	ok     bool // valid, not too deep, no clashing keys
	why    string
}

// fold is encoding/json's folding of a name it matches to struct fields.
func fold(s string) string {
	return strings.Map(func(r rune) rune { return unicode.ToUpper(unicode.ToLower(r)) }, s)
}

// refMember finds o's member named k the way encoding/json matches fields.
func refMember(o *Object, k string) *Member {
	if o == nil {
		return nil
	}
	for i, m := range o.Members {
		if m.Name == k {
			return &o.Members[i]
		}
	}
	for i, m := range o.Members {
		if o.Fold && fold(m.Name) == fold(k) {
			return &o.Members[i]
		}
	}
	return nil
}

// refCheck checks a document the slow way: json.Valid for syntax, then tokens.
func refCheck(b []byte, maxDepth int, root *Object) refResult {
	if !json.Valid(b) {
		return refResult{syntax: true, why: "invalid JSON"}
	}
	type frame struct {
		obj     bool
		o       *Object
		keys    []string
		wantKey bool
		key     string // the key of the value being read
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var stack []*frame
	fail := func(why string) refResult { return refResult{why: why} }
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fail("token: " + err.Error())
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.wantKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				if len(stack) > 0 {
					stack[len(stack)-1].wantKey = true
				}
				continue
			}
			k := tok.(string)
			strict := top.o != nil && top.o.Fold
			for _, e := range top.keys {
				if e == k {
					return fail("duplicate " + k)
				}
				if strict && fold(e) == fold(k) {
					return fail("case variant " + k)
				}
			}
			if top.o != nil && !slices.Contains(top.o.Fields, k) {
				for _, f := range top.o.Fields {
					if fold(f) == fold(k) {
						return fail("misspelled " + k)
					}
				}
			}
			top.keys = append(top.keys, k)
			top.key, top.wantKey = k, false
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack)+1 > maxDepth {
				return fail("too deep")
			}
			var o *Object
			switch {
			case top == nil:
				o = root
			case top.obj:
				if m := refMember(top.o, top.key); m != nil {
					o = m.Object
				}
			}
			if tok == json.Delim('[') {
				o = nil
			}
			stack = append(stack, &frame{obj: tok == json.Delim('{'), o: o, wantKey: true})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 {
				stack[len(stack)-1].wantKey = true
			}
		default:
			if top != nil {
				top.wantKey = true
			}
		}
	}
	return refResult{ok: true}
}

// refSpans is what encoding/json finds for o's members in the object v:
// each value, with its number of members when it is an object.
func refSpans(v []byte, o *Object) map[int]refSpan {
	out := map[int]refSpan{}
	var walk func(v []byte, o *Object)
	walk = func(v []byte, o *Object) {
		var m map[string]json.RawMessage
		if o == nil || json.Unmarshal(v, &m) != nil {
			return
		}
		for k, raw := range m {
			mem := refMember(o, k)
			if mem == nil {
				continue
			}
			var inner map[string]json.RawMessage
			if raw[0] == '{' {
				_ = json.Unmarshal(raw, &inner)
			}
			out[mem.Slot] = refSpan{raw, len(inner)}
			walk(raw, mem.Object)
		}
	}
	walk(v, o)
	return out
}

type refSpan struct {
	value   []byte
	members int
}

// FuzzDecode checks the scanner against encoding/json: it refuses exactly
// the documents that are not valid JSON, too deep, or have clashing keys,
// and notes the values encoding/json finds for the schema's members.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`))
	f.Add([]byte(`{"params":{"inputResponses":{"a":{},"b":{"c":[1,2]}},"arguments":[1,{"x":"\ud83d\ude00"}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		const depth = 16
		res, err := testSchema.Check(b, depth)
		ref := refCheck(b, depth, testSchema.root)
		switch {
		case err == nil && !ref.ok:
			t.Fatalf("scanner accepts, reference refuses (%s): %q", ref.why, b)
		case err != nil && ref.ok:
			t.Fatalf("scanner refuses (%v), reference accepts: %q", err, b)
		case err != nil && err.Syntax && !ref.syntax:
			t.Fatalf("scanner says syntax error (%v) on valid JSON: %q", err, b)
		}
		if err != nil {
			if !utf8.ValidString(message(err)) {
				t.Fatalf("message is not UTF-8: %q", message(err))
			}
			return
		}
		want := refSpans(bytes.TrimSpace(b), testSchema.root)
		for slot := range slots {
			got := res.Spans[slot].In(b)
			w, ok := want[slot]
			if !bytes.Equal(got, w.value) || (got == nil) == ok {
				t.Fatalf("slot %d: scanner notes %q, encoding/json finds %q: %q", slot, got, w.value, b)
			}
			if ok && int(res.Spans[slot].Members) != w.members {
				t.Fatalf("slot %d: scanner counts %d members, encoding/json %d: %q", slot, res.Spans[slot].Members, w.members, b)
			}
		}
	})
}

// BenchmarkCheck compares the scanner with a token-stream check built on
// encoding/json's Decoder.
func BenchmarkCheck(b *testing.B) {
	small := []byte(`{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"render_report","arguments":{"title":"Quarterly","pages":12,"tags":["a","b"]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":"p1"}}}`)
	const row = `{"id":12345,"name":"row name with some text","score":0.75,"ok":true,"tags":["x","y"]}`
	big := []byte(`{"params":{"arguments":{"rows":[` + strings.Repeat(row+",", 999) + row + `]}}}`)
	for _, body := range []struct {
		name string
		b    []byte
	}{{"small", small}, {"64KiB", big}} {
		b.Run(body.name+"/check", func(b *testing.B) {
			b.SetBytes(int64(len(body.b)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := testSchema.Check(body.b, 64); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(body.name+"/tokens", func(b *testing.B) {
			b.SetBytes(int64(len(body.b)))
			b.ReportAllocs()
			for b.Loop() {
				if r := refCheck(body.b, 64, testSchema.root); !r.ok {
					b.Fatal(r.why)
				}
			}
		})
	}
}
