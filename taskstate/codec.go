package taskstate

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The record codec. Every store keeps records as the JSON encoding/json
// writes for Task; these functions write and read that JSON directly for
// the records stores handle all the time (ASCII strings, known fields), so
// the task path pays for no reflection. Anything else — a string needing
// escapes, a raw value to check, a field spelled differently, a null —
// goes through encoding/json, so both paths accept and produce the same.

// appendRecord appends t as encoding/json would, up to the spacing inside
// raw values; false when encoding/json must do it.
func appendRecord(b []byte, t *Task) ([]byte, bool) {
	w := recordWriter{b: append(b, '{'), ok: true}
	w.str(`"id":`, t.ID, false)
	w.str(`,"kind":`, t.Kind, true)
	w.str(`,"tool":`, t.Tool, false)
	w.raw(`,"arguments":`, t.Arguments)
	w.str(`,"owner":`, t.Owner, true)
	w.str(`,"idempotencyKey":`, t.IdempotencyKey, true)
	w.str(`,"inputDigest":`, t.InputDigest, true)
	w.str(`,"era":`, string(t.Era), false)
	w.str(`,"mode":`, string(t.Mode), false)
	w.str(`,"status":`, string(t.Status), false)
	w.str(`,"statusMessage":`, t.StatusMessage, true)
	w.time(`,"createdAt":`, t.CreatedAt)
	w.time(`,"lastUpdatedAt":`, t.LastUpdatedAt)
	w.num(`,"ttlMs":`, t.TTLMs, false)
	w.num(`,"pollIntervalMs":`, t.PollIntervalMs, true)
	w.raw(`,"result":`, t.Result)
	if e := t.Error; e != nil {
		w.num(`,"error":{"code":`, int64(e.Code), false)
		w.str(`,"message":`, e.Message, false)
		w.raw(`,"data":`, e.Data)
		w.b = append(w.b, '}')
	}
	w.rawMap(`,"inputRequests":`, t.InputRequests)
	w.rawMap(`,"inputResponses":`, t.InputResponses)
	w.num(`,"attempt":`, int64(t.Attempt), true)
	w.num(`,"maxAttempts":`, int64(t.MaxAttempts), true)
	if l := t.Lease; l != nil {
		w.str(`,"lease":{"worker":`, l.Worker, false)
		w.time(`,"expires":`, l.Expires)
		w.b = append(w.b, '}')
	}
	w.num(`,"requeues":`, int64(t.Requeues), true)
	if p := t.Parked; p != nil {
		w.time(`,"parked":{"since":`, p.Since)
		w.time(`,"until":`, p.Until)
		w.b = append(w.b, '}')
	}
	w.num(`,"parks":`, int64(t.Parks), true)
	w.num(`,"retries":`, int64(t.Retries), true)
	w.raw(`,"checkpoint":`, t.Checkpoint)
	if t.ArgumentsRef != nil || t.ResultRef != nil || t.Artifacts != nil {
		w.ok = false // rare: encoding/json writes them
	}
	w.rawMap(`,"meta":`, t.Meta)
	return append(w.b, '}'), w.ok
}

type recordWriter struct {
	b  []byte
	ok bool // false: something needs encoding/json
}

func (w *recordWriter) str(key, s string, omitEmpty bool) {
	if omitEmpty && s == "" {
		return
	}
	w.b = append(w.b, key...)
	w.plain(s)
}

// plain appends s as a JSON string if it needs no escapes.
func (w *recordWriter) plain(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			w.ok = false
			return
		}
	}
	w.b = append(w.b, '"')
	w.b = append(w.b, s...)
	w.b = append(w.b, '"')
}

func (w *recordWriter) raw(key string, v json.RawMessage) {
	if len(v) == 0 {
		return
	}
	w.b = append(w.b, key...)
	w.value(v)
}

// value appends a raw value; encoding/json refuses one that is not JSON.
func (w *recordWriter) value(v json.RawMessage) {
	if v == nil {
		v = json.RawMessage("null")
	} else if !json.Valid(v) {
		w.ok = false
	}
	w.b = append(w.b, v...)
}

func (w *recordWriter) time(key string, t time.Time) {
	w.b = append(w.b, key...)
	w.b = append(w.b, '"')
	var err error
	if w.b, err = t.AppendText(w.b); err != nil {
		w.ok = false // a year encoding/json cannot write either
	}
	w.b = append(w.b, '"')
}

func (w *recordWriter) num(key string, n int64, omitEmpty bool) {
	if omitEmpty && n == 0 {
		return
	}
	w.b = append(w.b, key...)
	w.b = strconv.AppendInt(w.b, n, 10)
}

// rawMap appends a map with its keys sorted, as encoding/json writes maps.
func (w *recordWriter) rawMap(key string, m map[string]json.RawMessage) {
	if len(m) == 0 {
		return
	}
	w.b = append(w.b, key...)
	w.b = append(w.b, '{')
	if len(m) == 1 {
		for k, v := range m {
			w.plain(k)
			w.b = append(w.b, ':')
			w.value(v)
		}
	} else {
		for i, k := range slices.Sorted(maps.Keys(m)) {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.plain(k)
			w.b = append(w.b, ':')
			w.value(m[k])
		}
	}
	w.b = append(w.b, '}')
}

// decodeRecord reads b into t when b is an object of known keys with plain
// values (as appendRecord writes them); false when encoding/json must read
// it. b must be valid JSON.
func decodeRecord(b []byte, t *Task) bool {
	d := recordReader{b: b}
	return d.members(func(key []byte) bool { return d.field(key, t) })
}

// members reads an object whose members value reads (see object).
func (d *recordReader) members(value func(key []byte) bool) bool {
	var seen uint64
	return d.object(&seen, value)
}

type recordReader struct {
	b []byte
	i int
}

func (d *recordReader) ws() {
	for d.i < len(d.b) && (d.b[d.i] == ' ' || d.b[d.i] == '\t' || d.b[d.i] == '\n' || d.b[d.i] == '\r') {
		d.i++
	}
}

func (d *recordReader) byte(c byte) bool {
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		d.ws()
		return true
	}
	return false
}

// object reads an object, calling value for each member with the reader at
// the value. A key that needs escapes, or comes twice (seen holds a bit per
// known key), is left to encoding/json.
func (d *recordReader) object(seen *uint64, value func(key []byte) bool) bool {
	if !d.byte('{') {
		return false
	}
	if d.byte('}') {
		return true
	}
	for {
		key, ok := d.plainBytes()
		if !ok || !d.byte(':') {
			return false
		}
		bit := uint64(1) << (keyHash(key) % 64)
		if *seen&bit != 0 {
			return false // a repeat (or a hash collision): encoding/json's rules
		}
		*seen |= bit
		if !value(key) {
			return false
		}
		if d.byte('}') {
			return true
		}
		if !d.byte(',') {
			return false
		}
	}
}

func keyHash(k []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range k {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return h
}

// plainBytes reads a string without escapes or bytes outside printable
// ASCII; the slice points into b.
func (d *recordReader) plainBytes() ([]byte, bool) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return nil, false
	}
	d.i++
	start := d.i
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			d.i++
			return d.b[start : d.i-1], true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return nil, false
		}
		d.i++
	}
	return nil, false
}

func (d *recordReader) str(s *string) bool {
	v, ok := d.plainBytes()
	*s = string(v)
	return ok
}

// int reads an integer as encoding/json reads one into an int type.
func (d *recordReader) int(n *int64) bool {
	start := d.i
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	if d.i < len(d.b) && (d.b[d.i] == '.' || d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		return false
	}
	v, err := strconv.ParseInt(string(d.b[start:d.i]), 10, 64)
	*n = v
	return err == nil
}

func (d *recordReader) smallInt(n *int) bool {
	var v int64
	ok := d.int(&v)
	*n = int(v)
	return ok && int64(*n) == v
}

// time reads a string holding an RFC 3339 time, as Time.UnmarshalJSON does.
func (d *recordReader) time(t *time.Time) bool {
	v, ok := d.plainBytes()
	return ok && t.UnmarshalText(v) == nil
}

// raw reads any value but null (encoding/json would clear the field) and
// keeps a copy of it.
func (d *recordReader) raw(v *json.RawMessage) bool {
	start := d.i
	if !d.skip() || string(d.b[start:d.i]) == "null" {
		return false
	}
	*v = json.RawMessage(slices.Clone(d.b[start:d.i]))
	return true
}

// skip steps over one value (b is valid JSON).
func (d *recordReader) skip() bool {
	depth := 0
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			d.i++
			for d.i < len(d.b) && d.b[d.i] != '"' {
				if d.b[d.i] == '\\' {
					d.i++
				}
				d.i++
			}
			d.i++ // the closing quote
		case c == '{' || c == '[':
			depth++
			d.i++
			continue
		case c == '}' || c == ']':
			depth--
			d.i++
		case c == ',' || c == ':' || c == ' ' || c == '\t' || c == '\n' || c == '\r':
			d.i++
			continue
		default: // a number or a literal
			for d.i < len(d.b) && !strings.ContainsRune(",:]} \t\n\r", rune(d.b[d.i])) {
				d.i++
			}
		}
		if depth <= 0 {
			return depth == 0 && d.i <= len(d.b)
		}
	}
	return false
}

// rawMap reads an object into a new map of raw values (null kept as
// "null", as encoding/json keeps it in a map).
func (d *recordReader) rawMap(m *map[string]json.RawMessage) bool {
	out := make(map[string]json.RawMessage, 2)
	*m = out
	return d.members(func(key []byte) bool {
		if _, dup := out[string(key)]; dup {
			return false
		}
		start := d.i
		if !d.skip() {
			return false
		}
		out[string(key)] = json.RawMessage(slices.Clone(d.b[start:d.i]))
		return true
	})
}

// field reads the value of one record key; false for a key encoding/json
// must match (another spelling, an unknown key).
func (d *recordReader) field(key []byte, t *Task) bool {
	switch string(key) {
	case "id":
		return d.str(&t.ID)
	case "kind":
		return d.str(&t.Kind)
	case "tool":
		return d.str(&t.Tool)
	case "owner":
		return d.str(&t.Owner)
	case "idempotencyKey":
		return d.str(&t.IdempotencyKey)
	case "inputDigest":
		return d.str(&t.InputDigest)
	case "era":
		return d.str((*string)(&t.Era))
	case "mode":
		return d.str((*string)(&t.Mode))
	case "status":
		return d.str((*string)(&t.Status))
	case "statusMessage":
		return d.str(&t.StatusMessage)
	case "createdAt":
		return d.time(&t.CreatedAt)
	case "lastUpdatedAt":
		return d.time(&t.LastUpdatedAt)
	case "ttlMs":
		return d.int(&t.TTLMs)
	case "pollIntervalMs":
		return d.int(&t.PollIntervalMs)
	case "attempt":
		return d.smallInt(&t.Attempt)
	case "maxAttempts":
		return d.smallInt(&t.MaxAttempts)
	case "requeues":
		return d.smallInt(&t.Requeues)
	case "parks":
		return d.smallInt(&t.Parks)
	case "retries":
		return d.smallInt(&t.Retries)
	case "checkpoint":
		return d.raw(&t.Checkpoint)
	case "parked":
		p := &Parked{}
		t.Parked = p
		return d.members(func(k []byte) bool {
			switch string(k) {
			case "since":
				return d.time(&p.Since)
			case "until":
				return d.time(&p.Until)
			}
			return false
		})
	case "arguments":
		return d.raw(&t.Arguments)
	case "result":
		return d.raw(&t.Result)
	case "inputRequests":
		return d.rawMap(&t.InputRequests)
	case "inputResponses":
		return d.rawMap(&t.InputResponses)
	case "meta":
		return d.rawMap(&t.Meta)
	case "error":
		e := &RPCError{}
		t.Error = e
		return d.members(func(k []byte) bool {
			switch string(k) {
			case "code":
				return d.smallInt(&e.Code)
			case "message":
				return d.str(&e.Message)
			case "data":
				return d.raw(&e.Data)
			}
			return false
		})
	case "lease":
		l := &Lease{}
		t.Lease = l
		return d.members(func(k []byte) bool {
			switch string(k) {
			case "worker":
				return d.str(&l.Worker)
			case "expires":
				return d.time(&l.Expires)
			}
			return false
		})
	}
	return false
}
