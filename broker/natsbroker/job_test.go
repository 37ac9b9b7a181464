package natsbroker

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpqueue/mcpqueue/broker"
)

// A job that carries its record goes compact (no JSON, the record to the
// end, the arguments and meta left to the record); any other job is
// broker.EncodeJob's JSON, and both read back as they were sent.
func TestJobWireForms(t *testing.T) {
	t.Parallel()
	record := json.RawMessage(`{"id":"T0123456789ABCDEFGHIJKL","tool":"files.read","arguments":{"path":"/a"},"status":"working"}`)
	compact := &broker.Job{TaskID: "T0123456789ABCDEFGHIJKL", Kind: "prompt", Tool: "files.read", Owner: "iss|alice\n", ArgumentsRef: "T0/args",
		Arguments: json.RawMessage(`{"path":"/a"}`), Meta: map[string]json.RawMessage{"k": json.RawMessage(`1`)}, Record: record, Revision: 1 << 40}
	plain := &broker.Job{TaskID: "T0123456789ABCDEFGHIJKL", Dedupe: "T0123456789ABCDEFGHIJKL/r1", Tool: "echo", Arguments: json.RawMessage(`{"n":1}`)}

	b, err := encodeJob(compact)
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != compactJob || !strings.HasSuffix(string(b), string(record)) || strings.Count(string(b), `"path"`) != 1 {
		t.Fatalf("compact form %q: want the marker, the record once at the end, no arguments besides", b)
	}
	var got broker.Job
	if err := decodeJob(b, &got); err != nil {
		t.Fatal(err)
	}
	want := *compact
	want.Arguments, want.Meta = nil, nil // the record holds them
	if !reflect.DeepEqual(&got, &want) {
		t.Fatalf("compact job read back as\n%+v\nwant\n%+v", got, want)
	}

	b, err = encodeJob(plain)
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != '{' {
		t.Fatalf("a job without its record is JSON, got %q", b)
	}
	got = broker.Job{}
	if err := decodeJob(b, &got); err != nil || !reflect.DeepEqual(&got, plain) {
		t.Fatalf("JSON job read back as %+v, %v", got, err)
	}

	// Every cut of a compact job short of its record is refused, not
	// misread.
	b, _ = encodeJob(compact)
	for n := range len(b) - len(record) {
		if err := decodeJob(b[:n], &broker.Job{}); err == nil {
			t.Fatalf("a compact job cut to %d of %d bytes decoded", n, len(b))
		}
	}
	if _, err := encodeJob(&broker.Job{Tool: "echo", Record: record}); err == nil {
		t.Fatal("a job without a task id encoded")
	}
}
