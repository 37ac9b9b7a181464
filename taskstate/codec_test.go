package taskstate

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// codecRecords are records of every shape: each field set and unset,
// strings that need escapes, maps, nulls inside raw values.
func codecRecords() []*Task {
	now := time.Date(2026, 11, 30, 8, 0, 0, 123456789, time.UTC)
	base := Task{ID: "ABCDEFGHIJKLMNOPQRSTUVWXYZ", Tool: "noop", Era: Era20260728, Mode: ModeTask, Status: Working, CreatedAt: now, LastUpdatedAt: now, TTLMs: 3600000}
	var out []*Task
	add := func(f func(t *Task)) {
		t := base
		f(&t)
		out = append(out, &t)
	}
	add(func(t *Task) {})
	add(func(t *Task) {
		t.Kind, t.Owner, t.StatusMessage, t.PollIntervalMs, t.Attempt, t.Requeues, t.MaxAttempts = KindPrompt, "alice", "half way", 500, 2, 1, 5
		t.IdempotencyKey, t.InputDigest = "retry-7 {a b}", InputDigest(KindPrompt, "noop", nil)
		t.Arguments = json.RawMessage(`{"a":[1,2,{"b":null}],"c":"d"}`)
		t.Lease = &Lease{Worker: "w-1", Expires: now.Add(30 * time.Second)}
		t.Parked, t.Parks, t.Retries, t.Checkpoint = &Parked{Since: now, Until: now.Add(time.Hour)}, 1, 1, json.RawMessage(`{"page":3}`)
		t.Meta = map[string]json.RawMessage{"progressToken": json.RawMessage(`"p"`), "clientCapabilities": json.RawMessage(`{}`), "z": nil}
	})
	add(func(t *Task) {
		t.Status = Completed
		t.Result = json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)
	})
	add(func(t *Task) {
		t.Status, t.StatusMessage = Failed, "bad \"quote\" <html> & ünïcode\n"
		t.Error = &RPCError{Code: -32603, Message: "boom", Data: json.RawMessage(`{"why":1}`)}
	})
	add(func(t *Task) {
		t.Status = InputRequired
		t.InputRequests = map[string]json.RawMessage{"k2": json.RawMessage(`{"method":"elicitation/create"}`), "k1": json.RawMessage(`{}`)}
		t.InputResponses = map[string]json.RawMessage{"k0": json.RawMessage(`{"action":"accept"}`)}
	})
	add(func(t *Task) { t.CreatedAt = time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)) })
	add(func(t *Task) { t.Owner = "ünï" }) // escapes in a key-like string
	add(func(t *Task) { t.Meta = map[string]json.RawMessage{"a<b": json.RawMessage(`1`)} })
	add(func(t *Task) { t.Error = &RPCError{} })
	add(func(t *Task) { t.InputRequests = map[string]json.RawMessage{} }) // empty: omitted
	add(func(t *Task) {
		t.ArgumentsRef = &BlobRef{Key: "x/args", Size: 300000}
		t.ResultRef = &BlobRef{Key: "x/result", Size: 9000000, Plain: true, IsError: true}
		t.Artifacts = map[string]Artifact{"report.pdf": {MimeType: "application/pdf", Size: 10}}
	})
	return out
}

// Every stored field of Task is set in some codec record, so a field added
// to Task but not to the hand-written codec fails the match tests above
// instead of silently going unstored.
func TestCodecRecordsCoverEveryField(t *testing.T) {
	typ := reflect.TypeFor[Task]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() || f.Tag.Get("json") == "-" {
			continue
		}
		set := false
		for _, r := range codecRecords() {
			if !reflect.ValueOf(r).Elem().Field(i).IsZero() {
				set = true
				break
			}
		}
		if !set {
			t.Errorf("no codec record sets Task.%s: add it to codecRecords (and to the codec)", f.Name)
		}
	}
}

// Encode writes exactly what encoding/json writes (the records' raw values
// are compact, so no spacing differs).
func TestEncodeMatchesEncodingJSON(t *testing.T) {
	for i, r := range codecRecords() {
		got, err := Encode(r)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		want, _ := json.Marshal(r)
		if !bytes.Equal(got, want) {
			t.Errorf("record %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// A raw value that is not JSON is refused, as encoding/json refuses it,
// and so is a time encoding/json cannot write.
func TestEncodeRefusesWhatEncodingJSONRefuses(t *testing.T) {
	for name, r := range map[string]*Task{
		"arguments": {ID: "x", Arguments: json.RawMessage(`{"a":`)},
		"meta":      {ID: "x", Meta: map[string]json.RawMessage{"k": json.RawMessage(`nope`)}},
		"year":      {ID: "x", CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		if _, err := Encode(r); err == nil {
			t.Errorf("%s: Encode accepted it", name)
		}
	}
}

// Decode reads back what Encode wrote, and reads any record as
// encoding/json reads it.
func TestDecodeMatchesEncodingJSON(t *testing.T) {
	for i, r := range codecRecords() {
		b, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		checkDecode(t, b)
		got, err := Decode(b, 9)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		want := *r
		want.Revision = 9
		want.CreatedAt, want.LastUpdatedAt = got.CreatedAt, got.LastUpdatedAt // compared by checkDecode
		if want.Lease != nil {
			l := *want.Lease
			l.Expires = got.Lease.Expires
			want.Lease = &l
		}
		if len(want.InputRequests) == 0 {
			want.InputRequests = nil
		}
		if v, ok := want.Meta["z"]; ok && v == nil { // written as null, read as null
			want.Meta = map[string]json.RawMessage{"z": json.RawMessage("null"), "progressToken": want.Meta["progressToken"], "clientCapabilities": want.Meta["clientCapabilities"]}
		}
		if !reflect.DeepEqual(got, &want) {
			t.Errorf("record %d: decoded\n%+v\nwant\n%+v", i, got, &want)
		}
	}
	for _, b := range []string{
		`{"id":"x","status":"working","ttlMs":1,"createdAt":"2026-11-30T08:00:00Z","lastUpdatedAt":"2026-11-30T08:00:00Z"}`,
		`{"ID":"case","Status":"working"}`,                          // case-folded keys
		`{"id":"x","meta":{"a":1},"meta":{"b":2}}`,                  // a duplicate map merges
		`{"id":"x","result":null,"error":null,"lease":null}`,        // nulls
		`{"id":"esc\u0041","tool":"t\"q"}`,                          // escapes
		`{"id":"x","ttlMs":1.5}`,                                    // wrong type
		`{"id":"x","attempt":"1"}`,                                  // wrong type
		`{"id":"x","createdAt":"yesterday"}`,                        // bad time
		`{"id":"x","unknown":{"deep":[1,2,3]},"tool":"t"}`,          // unknown key
		`{"id":"x","error":{"code":1,"message":"m","data":[true]}}`, // nested
		`{"id":"x","lease":{"worker":"w","expires":"2026-11-30T08:00:00.5+01:00"}}`,
		` {"id":"x"} `,
		`{"id":"x"`,
		`[]`,
	} {
		checkDecode(t, []byte(b))
	}
}

// checkDecode compares Decode with json.Unmarshal on b.
func checkDecode(t *testing.T, b []byte) {
	t.Helper()
	var want Task
	werr := json.Unmarshal(b, &want)
	want.Revision = 3
	got, err := Decode(b, 3)
	if (err == nil) != (werr == nil) {
		t.Fatalf("Decode error %v, encoding/json error %v: %s", err, werr, b)
	}
	if err != nil {
		return
	}
	// Times compare by instant and zone offset (reflect sees the location pointer).
	same := func(a, b time.Time) bool {
		_, oa := a.Zone()
		_, ob := b.Zone()
		return a.Equal(b) && oa == ob
	}
	if !same(got.CreatedAt, want.CreatedAt) || !same(got.LastUpdatedAt, want.LastUpdatedAt) ||
		(got.Lease != nil && want.Lease != nil && !same(got.Lease.Expires, want.Lease.Expires)) {
		t.Fatalf("times differ: decoded %+v, encoding/json %+v: %s", got, want, b)
	}
	g := *got
	g.CreatedAt, g.LastUpdatedAt = want.CreatedAt, want.LastUpdatedAt
	if g.Lease != nil && want.Lease != nil {
		l := *g.Lease
		l.Expires = want.Lease.Expires
		g.Lease = &l
	}
	if !reflect.DeepEqual(&g, &want) {
		t.Fatalf("decoded\n%+v\nencoding/json\n%+v\n%s", &g, &want, b)
	}
}

func FuzzDecode(f *testing.F) {
	for _, r := range codecRecords() {
		b, _ := Encode(r)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecode(t, b) })
}
