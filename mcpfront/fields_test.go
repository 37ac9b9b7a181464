package mcpfront

import (
	"bytes"
	"encoding/json"
	"testing"
)

// checkSpans compares what fields.go reads off checkBody's notes with what
// encoding/json decodes from the same accepted body: where the spans are
// used, the request and the 2026-07-28 params must come out the same.
func checkSpans(t *testing.T, b []byte, info *bodyInfo) {
	t.Helper()
	b = bytes.TrimSpace(b)
	var got, want request
	if !info.f.decodeRequest(b, &got) {
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
	if !info.f.modernParams(b, &gp) {
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
		info, err := checkBody([]byte(b), defaultMaxDepth)
		if err != nil {
			t.Fatalf("checkBody refuses %q: %s", b, err.msg)
		}
		checkSpans(t, []byte(b), &info)
	}
}
