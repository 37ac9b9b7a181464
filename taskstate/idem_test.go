package taskstate

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestIdempotentIDStableAndScoped(t *testing.T) {
	id := IdempotentID("alice", "k-1", "")
	if !ValidID(id) || len(id) != len(NewID()) {
		t.Fatalf("IdempotentID = %q: want a valid id as long as NewID's", id)
	}
	if again := IdempotentID("alice", "k-1", ""); again != id {
		t.Fatalf("IdempotentID not stable: %q then %q", id, again)
	}
	for _, other := range [][3]string{
		{"bob", "k-1", ""},     // another owner
		{"alice", "k-2", ""},   // another key
		{"alice", "k-1", "s1"}, // another round
		{"", "alicek-1", ""},   // the parts run together
		{"alice", "k-", "1"},
	} {
		if got := IdempotentID(other[0], other[1], other[2]); got == id {
			t.Errorf("IdempotentID%q = %q, the same as (alice, k-1, \"\")", other, got)
		}
	}
}

func TestInputDigestCanonical(t *testing.T) {
	d := InputDigest(KindTool, "wait", json.RawMessage(`{"ms":5,"label":"a"}`))
	for _, same := range []string{`{"label":"a","ms":5}`, " {\n\"ms\" : 5, \"label\":\"a\"} "} {
		if got := InputDigest(KindTool, "wait", json.RawMessage(same)); got != d {
			t.Errorf("InputDigest(%s) = %s, want %s (same arguments)", same, got, d)
		}
	}
	for _, other := range []struct{ kind, tool, args string }{
		{KindTool, "wait", `{"ms":6,"label":"a"}`},
		{KindTool, "wait", `{"ms":5.0,"label":"a"}`},
		{KindTool, "sleep", `{"ms":5,"label":"a"}`},
		{KindPrompt, "wait", `{"ms":5,"label":"a"}`},
		{KindTool, "wait", `{"ms":5}`},
	} {
		if got := InputDigest(other.kind, other.tool, json.RawMessage(other.args)); got == d {
			t.Errorf("InputDigest(%q, %q, %s) = the digest of another call", other.kind, other.tool, other.args)
		}
	}
	empty := InputDigest(KindTool, "noop", nil)
	for _, args := range []string{"null", "{}", " { } "} {
		if got := InputDigest(KindTool, "noop", json.RawMessage(args)); got != empty {
			t.Errorf("InputDigest of arguments %q differs from absent arguments", args)
		}
	}
}

func TestCheckIdempotencyKey(t *testing.T) {
	for _, ok := range []string{"a", "retry 1 of {job}", strings.Repeat("x", MaxIdempotencyKey), "~!@#$%^&*()"} {
		if err := CheckIdempotencyKey(ok); err != nil {
			t.Errorf("CheckIdempotencyKey(%.20q) = %v, want ok", ok, err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("x", MaxIdempotencyKey+1), "tab\there", "new\nline", "ünï", "del\x7f"} {
		if err := CheckIdempotencyKey(bad); err == nil {
			t.Errorf("CheckIdempotencyKey(%.20q) = nil, want an error", bad)
		}
	}
}
