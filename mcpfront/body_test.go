package mcpfront

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpqueue/mcpqueue/vocab"
)

// checkSpans compares what body.go reads off checkBody's notes with what
// encoding/json decodes from the same accepted body: where the spans are
// used, the request and the 2026-07-28 params must come out the same.
func checkSpans(t *testing.T, b []byte, info *bodyInfo) {
	t.Helper()
	b = bytes.TrimSpace(b)
	var got, want request
	if !info.decodeRequest(b, &got) {
		return
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("spans decode a body encoding/json refuses (%v): %q", err, b)
	}
	if got.JSONRPC != want.JSONRPC || got.Method != want.Method || !bytes.Equal(got.ID, want.ID) ||
		!bytes.Equal(got.Params, want.Params) || !bytes.Equal(got.Result, want.Result) || !bytes.Equal(got.Error, want.Error) {
		t.Fatalf("envelope from spans %+v, encoding/json %+v: %q", got, want, b)
	}
	var gp, wp modernParams
	if !info.modernParams(b, &gp) {
		return
	}
	if len(want.Params) > 0 {
		if err := json.Unmarshal(want.Params, &wp); err != nil {
			t.Fatalf("spans decode params encoding/json refuses (%v): %q", err, b)
		}
	}
	for _, f := range []struct {
		name string
		g, w json.RawMessage
	}{{"name", gp.Name, wp.Name}, {"uri", gp.URI, wp.URI}, {"taskId", gp.TaskID, wp.TaskID}, {"arguments", gp.Arguments, wp.Arguments},
		{"inputResponses", gp.InputResponses, wp.InputResponses}, {"requestState", gp.RequestState, wp.RequestState}} {
		if !bytes.Equal(f.g, f.w) || (f.g == nil) != (f.w == nil) {
			t.Fatalf("params.%s from spans %q, encoding/json %q: %q", f.name, f.g, f.w, b)
		}
	}
	if (gp.Meta == nil) != (wp.Meta == nil) {
		t.Fatalf("_meta from spans %v, encoding/json %v: %q", gp.Meta, wp.Meta, b)
	}
	for _, k := range spanMeta {
		g, gok := gp.Meta[k]
		w, wok := wp.Meta[k]
		if gok != wok || !bytes.Equal(g, w) {
			t.Fatalf("_meta[%q] from spans %q, encoding/json %q: %q", k, g, w, b)
		}
	}
}

func TestSpansMatchEncodingJSON(t *testing.T) {
	for _, b := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"progressToken":"p","io.modelcontextprotocol/protocolVersion":"2026-07-28","other":1}}}`,
		`{"jsonrpc":"2.0","id":"x","method":"tasks\/get","params":{"taskId":"T"}}`,          // escaped: encoding/json decodes it
		`{"jsonrpc":"2.0","id":1,"method":"m","params":null}`,                               // null params
		`{"jsonrpc":null,"id":null,"method":null}`,                                          // nulls
		`{"jsonrpc":2,"method":"m"}`,                                                        // wrong type: encoding/json's error
		`{"jsonrpc":"2.0","id":1,"method":"m","params":[1]}`,                                // params not an object
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":"x"}}`,                      // _meta not an object
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":null,"URI":"u"}}`,           // uri folds
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"tr\u0061ceparent":"t"}}}`, // escaped meta key
		`{"jsonrpc":"2.0","id":1,"method":"\u00e9","params":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":"é","params":{"name":"\u00e9"}}`,
		"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\"}", // invalid UTF-8
		`{"id":1,"result":{"a":1}}`,
		`{ "jsonrpc" : "2.0" , "id" : 1 , "method" : "m" , "params" : { "name" : "n" } }`,
	} {
		info, _, err := checkBody([]byte(b), defaultMaxDepth)
		if err != nil {
			t.Fatalf("checkBody refuses %q: %s", b, err.Message)
		}
		checkSpans(t, []byte(b), &info)
	}
}

// TestCheckBodyRefusals checks the JSON-RPC errors of refused bodies: the
// code, the message, and the id echoed when it was read before the problem
// and is not the problem (internal/jsonscan tests what is refused).
func TestCheckBodyRefusals(t *testing.T) {
	for _, c := range []struct {
		body string
		code int
		msg  string
		id   string
	}{
		{body: ``, code: vocab.CodeParseError, msg: "parse error: empty body"},
		{body: `{"id":1,"a":tru}`, code: vocab.CodeParseError, msg: "parse error: invalid character"},
		{body: `{"id":1,"a":` + strings.Repeat("[", 65) + strings.Repeat("]", 65) + `}`, code: vocab.CodeInvalidRequest, msg: "invalid request: nesting deeper than 64", id: "1"},
		{body: `{"id":7,"method":"a","method":"b"}`, code: vocab.CodeInvalidRequest, msg: `invalid request: duplicate key "method"`, id: "7"},
		{body: `{"id":7,"id":8,"method":"a"}`, code: vocab.CodeInvalidRequest, msg: `invalid request: duplicate key "id"`},
		{body: `{"id":7,"ID":8}`, code: vocab.CodeInvalidRequest, msg: `differs only in case`},
		{body: `{"id":{"a":1},"method":"a","method":"b"}`, code: vocab.CodeInvalidRequest, msg: `duplicate key "method"`},
		{body: `{"id":"x","params":{"name":"a","name":"b"}}`, code: vocab.CodeInvalidRequest, msg: `invalid request: duplicate key "name" in params`, id: `"x"`},
		{body: `{"jsonrpc":"2.0","id":1,"METHOD":"tools/call"}`, code: vocab.CodeInvalidRequest, msg: `invalid request: key "METHOD" must be spelled "method"`, id: "1"},
		{body: `{"params":{"arguments":{"list":[{},{"k":1,"k":2}]}},"id":3}`, code: vocab.CodeInvalidRequest, msg: `invalid request: duplicate key "k" in params.arguments.list[1]`},
	} {
		_, id, err := checkBody([]byte(c.body), defaultMaxDepth)
		switch {
		case err == nil:
			t.Errorf("%s: accepted", c.body)
		case err.Code != c.code || !strings.Contains(err.Message, c.msg) || err.httpStatus() != http.StatusBadRequest:
			t.Errorf("%s: got %d %q (HTTP %d), want %d containing %q", c.body, err.Code, err.Message, err.httpStatus(), c.code, c.msg)
		case string(id) != c.id:
			t.Errorf("%s: echoes id %q, want %q", c.body, id, c.id)
		}
	}
}

// BenchmarkDecode measures the decode path of a request: encoding/json
// alone (what ServeHTTP did before the check), the check alone, and both
// (internal/jsonscan's BenchmarkCheck compares the check with a token-stream
// check built on encoding/json's Decoder).
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
		for _, then := range []bool{false, true} {
			name := body.name + "/check"
			if then {
				name += "+unmarshal"
			}
			b.Run(name, func(b *testing.B) {
				b.SetBytes(int64(len(body.b)))
				b.ReportAllocs()
				for b.Loop() {
					if _, _, err := checkBody(body.b, defaultMaxDepth); err != nil {
						b.Fatal(err.Message)
					}
					if !then {
						continue
					}
					var req request
					if err := json.Unmarshal(body.b, &req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
