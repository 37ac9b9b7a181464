package mcpfront

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheckBody(t *testing.T) {
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
	for _, c := range []struct {
		name, body string
		code       int    // 0: accepted
		msg        string // a part of the message
		id         string // the id the error may echo
	}{
		{name: "valid request", body: valid},
		{name: "scalars and escapes", body: `{"a":[1,-0.5e+3,true,false,null,"\u00e9\n\"\\\/",{}],"b":[]}`},
		{name: "_meta keys are case sensitive", body: `{"params":{"_meta":{"k":1,"K":2}}}`},
		{name: "nested argument keys are case sensitive", body: `{"params":{"arguments":{"m":{"k":1,"K":2}}}}`},
		{name: "invalid UTF-8 in a value", body: "{\"a\":\"\xff\xfe\"}"},
		{name: "depth at the limit", body: deep(64)},

		{name: "empty", body: ``, code: codeParse, msg: "empty body"},
		{name: "truncated", body: valid[:40], code: codeParse},
		{name: "trailing data", body: valid + `{}`, code: codeParse, msg: "data after the JSON value"},
		{name: "trailing garbage", body: valid + ` x`, code: codeParse},
		{name: "bad literal", body: `{"a":tru}`, code: codeParse},
		{name: "leading zero", body: `{"a":01}`, code: codeParse},
		{name: "bad escape", body: `{"a":"\x"}`, code: codeParse},
		{name: "short \\u escape", body: `{"a":"\u12"}`, code: codeParse},
		{name: "control character in a string", body: "{\"a\":\"\x01\"}", code: codeParse},
		{name: "missing colon", body: `{"a" 1}`, code: codeParse},
		{name: "trailing comma", body: `{"a":1,}`, code: codeParse},

		{name: "nesting past the limit", body: deep(65), code: codeInvalidRequest, msg: "nesting deeper than 64"},
		{name: "arrays count as nesting", body: `{"id":1,"a":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`, code: codeInvalidRequest, msg: "nesting deeper than 64", id: "1"},
		{name: "duplicate method", body: `{"id":7,"method":"a","method":"b"}`, code: codeInvalidRequest, msg: `duplicate key "method"`, id: "7"},
		{name: "duplicate id echoes nothing", body: `{"id":7,"id":8,"method":"a"}`, code: codeInvalidRequest, msg: `duplicate key "id"`},
		{name: "duplicate in params", body: `{"id":"x","params":{"name":"a","name":"b"}}`, code: codeInvalidRequest, msg: `duplicate key "name" in params`, id: `"x"`},
		{name: "duplicate deep in arguments", body: `{"params":{"arguments":{"list":[{},{"k":1,"k":2}]}}}`, code: codeInvalidRequest, msg: `duplicate key "k" in params.arguments.list[1]`},
		{name: "duplicate spelled with an escape", body: `{"method":"a","\u006dethod":"b"}`, code: codeInvalidRequest, msg: `duplicate key "method"`},
		{name: "duplicate surrogate pair", body: `{"\ud83d\ude00":1,"😀":2}`, code: codeInvalidRequest, msg: "duplicate key"},
		{name: "lone surrogates are the same key", body: `{"\ud800":1,"\udc00":2}`, code: codeInvalidRequest, msg: "duplicate key"},
		{name: "invalid UTF-8 keys are the same key", body: "{\"a\xff\":1,\"a\xfe\":2}", code: codeInvalidRequest, msg: "duplicate key"},
		{name: "case variant of method", body: `{"method":"a","Method":"b"}`, code: codeInvalidRequest, msg: `key "Method" differs only in case from key "method"`},
		{name: "lone case variant of a field", body: `{"jsonrpc":"2.0","id":1,"METHOD":"tools/call"}`, code: codeInvalidRequest, msg: `key "METHOD" must be spelled "method"`, id: "1"},
		{name: "case variant of taskId in params", body: `{"params":{"taskID":"t"}}`, code: codeInvalidRequest, msg: `key "taskID" must be spelled "taskId" in params`},
		{name: "Kelvin sign folds to k", body: `{"params":{"tas\u212aId":"t"}}`, code: codeInvalidRequest, msg: `must be spelled "taskId"`},
		{name: "long s folds to s", body: `{"params":{"ta\u017fkId":"t"}}`, code: codeInvalidRequest, msg: `must be spelled "taskId"`},
		{name: "case variant in arguments", body: `{"params":{"arguments":{"text":"a","TEXT":"b"}}}`, code: codeInvalidRequest, msg: `differs only in case from key "text" in params.arguments`},
		{name: "duplicate in a big object", body: `{"params":{"_meta":` + many("k", 40, "k") + `}}`, code: codeInvalidRequest, msg: `duplicate key "k" in params._meta`},
		{name: "case variant in big arguments", body: `{"params":{"arguments":` + many("k", 40, "KXX") + `}}`, code: codeInvalidRequest, msg: "differs only in case"},
		{name: "big object without clashes", body: `{"params":{"arguments":` + many("k", 40, "z") + `}}`},
		{name: "odd keys are quoted in the path", body: `{"params":{"arguments":{"a b":{"k":1,"k":1}}}}`, code: codeInvalidRequest, msg: `in params.arguments["a b"]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			info, err := checkBody([]byte(c.body), 64)
			ref := refCheck([]byte(c.body), 64)
			switch {
			case c.code == 0 && err != nil:
				t.Fatalf("refused: %d %s", err.code, err.msg)
			case c.code == 0:
				if !ref.ok {
					t.Errorf("the reference refuses it: %+v", ref)
				}
			case err == nil:
				t.Fatalf("accepted, want %d %q", c.code, c.msg)
			case err.code != c.code || !strings.Contains(err.msg, c.msg):
				t.Errorf("got %d %q, want %d containing %q", err.code, err.msg, c.code, c.msg)
			case string(err.id) != c.id:
				t.Errorf("id %q, want %q", err.id, c.id)
			case ref.ok:
				t.Errorf("the reference accepts it")
			}
			if c.body == valid && (info.argsLen != len(`{"text":"hi"}`) || info.inputKeys != 2 || string(info.id) != `"r1"`) {
				t.Errorf("info %+v", info)
			}
		})
	}
}

// refResult is what refCheck, a slow reference built on encoding/json's
// tokenizer, finds in a body.
type refResult struct {
	syntax    bool // not valid JSON
	ok        bool // valid, not too deep, no clashing keys
	why       string
	argsLen   int
	inputKeys int
}

// refCheck checks a body the slow way: json.Valid for syntax, then tokens.
func refCheck(b []byte, maxDepth int) refResult {
	if !json.Valid(b) {
		return refResult{syntax: true, why: "invalid JSON"}
	}
	type frame struct {
		obj     bool
		role    role
		keys    []string
		wantKey bool
		key     string // the key of the value being read
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var stack []*frame
	var res refResult
	fail := func(why string) refResult { return refResult{why: why} }
	argsStart := -1
	valueStart := func() int { // offset of the value after the key just read
		o := int(dec.InputOffset())
		for o < len(b) && (b[o] == ' ' || b[o] == '\t' || b[o] == '\n' || b[o] == '\r' || b[o] == ':') {
			o++
		}
		return o
	}
	// ended is called after each complete value.
	ended := func() {
		if len(stack) > 0 {
			top := stack[len(stack)-1]
			if top.obj {
				if top.role == roleParams && top.key == "arguments" && argsStart >= 0 {
					res.argsLen = int(dec.InputOffset()) - argsStart
					argsStart = -1
				}
				top.wantKey = true
			}
		}
	}
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
				if top.role == roleInputs {
					res.inputKeys = len(top.keys)
				}
				stack = stack[:len(stack)-1]
				ended()
				continue
			}
			k := tok.(string)
			for _, e := range top.keys {
				if e == k {
					return fail("duplicate " + k)
				}
				if (top.role == roleEnvelope || top.role == roleParams || top.role == roleArgs) && strings.EqualFold(e, k) {
					return fail("case variant " + k)
				}
			}
			var fields []string
			switch top.role {
			case roleEnvelope:
				fields = envelopeFields
			case roleParams:
				fields = paramsFields
			}
			exact := false
			for _, f := range fields {
				exact = exact || f == k
			}
			for _, f := range fields {
				if !exact && strings.EqualFold(f, k) {
					return fail("misspelled " + k)
				}
			}
			top.keys = append(top.keys, k)
			top.key, top.wantKey = k, false
			if top.role == roleParams && k == "arguments" {
				argsStart = valueStart()
			}
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack)+1 > maxDepth {
				return fail("too deep")
			}
			r := roleOther
			switch {
			case top == nil:
				r = roleEnvelope
			case top.obj && top.role == roleEnvelope && top.key == "params":
				r = roleParams
			case top.obj && top.role == roleParams && top.key == "arguments":
				r = roleArgs
			case top.obj && top.role == roleParams && top.key == "inputResponses":
				r = roleInputs
			}
			stack = append(stack, &frame{obj: tok == json.Delim('{'), role: r, wantKey: true})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			ended()
		default:
			ended()
		}
	}
	res.ok = true
	return res
}

// FuzzDecode checks the pre-decode scanner against encoding/json: it refuses
// exactly the bodies that are not valid JSON, too deep, or have clashing
// keys, and measures arguments and answers as the reference does.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`))
	f.Add([]byte(`{"params":{"inputResponses":{"a":{},"b":{"c":[1,2]}},"arguments":[1,{"x":"\ud83d\ude00"}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		const depth = 16
		info, err := checkBody(b, depth)
		ref := refCheck(b, depth)
		switch {
		case err == nil && !ref.ok:
			t.Fatalf("scanner accepts, reference refuses (%s): %q", ref.why, b)
		case err != nil && ref.ok:
			t.Fatalf("scanner refuses (%d %s), reference accepts: %q", err.code, err.msg, b)
		case err != nil && err.code == codeParse && !ref.syntax:
			t.Fatalf("scanner says parse error (%s) on valid JSON: %q", err.msg, b)
		case err != nil && err.code == codeInvalidRequest && ref.syntax && json.Valid(b):
			t.Fatalf("impossible")
		case err != nil && err.code != codeParse && err.code != codeInvalidRequest:
			t.Fatalf("code %d", err.code)
		case err == nil && (info.argsLen != ref.argsLen || info.inputKeys != ref.inputKeys):
			t.Fatalf("info %+v, reference %+v: %q", info, ref, b)
		}
		if err == nil {
			checkSpans(t, b, &info)
		}
		if err != nil && !utf8.ValidString(err.msg) {
			t.Fatalf("message is not UTF-8: %q", err.msg)
		}
		if err != nil && len(err.id) > 0 && !json.Valid(err.id) {
			t.Fatalf("echoed id %q is not JSON", err.id)
		}
	})
}

// BenchmarkDecode measures the decode path of a request: encoding/json
// alone (what ServeHTTP did before the check), the check alone, both, and
// a token-stream check built on encoding/json's Decoder for comparison.
func BenchmarkDecode(b *testing.B) {
	small := []byte(`{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"render_report","arguments":{"title":"Quarterly","pages":12,"tags":["a","b"]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}},"progressToken":"p1"}}}`)
	var big bytes.Buffer
	big.WriteString(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ingest","arguments":{"rows":[`)
	for i := range 1000 {
		if i > 0 {
			big.WriteString(",")
		}
		big.WriteString(`{"id":12345,"name":"row name with some text","score":0.75,"ok":true,"tags":["x","y"]}`)
	}
	big.WriteString(`]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	for _, body := range []struct {
		name string
		b    []byte
	}{{"small", small}, {"64KiB", big.Bytes()}} {
		b.Run(body.name+"/unmarshal", func(b *testing.B) {
			b.SetBytes(int64(len(body.b)))
			b.ReportAllocs()
			for b.Loop() {
				var req request
				if err := json.Unmarshal(body.b, &req); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(body.name+"/check", func(b *testing.B) {
			b.SetBytes(int64(len(body.b)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := checkBody(body.b, defaultMaxDepth); err != nil {
					b.Fatal(err.msg)
				}
			}
		})
		b.Run(body.name+"/check+unmarshal", func(b *testing.B) {
			b.SetBytes(int64(len(body.b)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := checkBody(body.b, defaultMaxDepth); err != nil {
					b.Fatal(err.msg)
				}
				var req request
				if err := json.Unmarshal(body.b, &req); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(body.name+"/tokens", func(b *testing.B) {
			b.SetBytes(int64(len(body.b)))
			b.ReportAllocs()
			for b.Loop() {
				if r := refCheck(body.b, defaultMaxDepth); !r.ok {
					b.Fatal(r.why)
				}
			}
		})
	}
}
