package taskstate

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Idempotency keys. A client that retries a call (its connection dropped
// before the answer came) sends the same idempotency key again; the call
// must then find the task the first attempt created instead of running the
// tool a second time. The task's id is derived from the key (IdempotentID),
// so the store's create-if-absent (Store.Create, ErrExists) decides which of
// two racing attempts — on two api replicas, say — creates the record: the
// other reads it. The record keeps the key and a digest of what was called
// (InputDigest), so the same key with another call is told apart from a
// retry.

// MaxIdempotencyKey is the longest idempotency key accepted, in bytes.
const MaxIdempotencyKey = 255

// CheckIdempotencyKey reports what is wrong with an idempotency key: it must
// be 1 to MaxIdempotencyKey bytes of printable ASCII (space to tilde).
func CheckIdempotencyKey(key string) error {
	if key == "" {
		return fmt.Errorf("must not be empty")
	}
	if len(key) > MaxIdempotencyKey {
		return fmt.Errorf("is %d bytes long; at most %d are allowed", len(key), MaxIdempotencyKey)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("byte %d is %#02x; only printable ASCII is allowed", i, c)
		}
	}
	return nil
}

// idEncoding writes ids in NewID's alphabet (base32, no padding).
var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// IdempotentID is the task id of the call owner makes with idempotency key
// key: 26 characters, like NewID's, that ValidID accepts. round tells apart
// the rounds of one multi-round call (the requestState it brings back; ""
// for a first call), whose retries each carry the same key. Two owners'
// keys never share an id, so another principal's key is another task.
//
// The id is a hash of its inputs: whoever knows the owner and the key can
// compute it. Without authentication (no owner) the key is therefore the
// only secret the task's id has; clients should make keys unguessable.
func IdempotentID(owner, key, round string) string {
	h := sha256.New()
	for _, part := range []string{"mcpqueue idempotency v1", owner, key, round} {
		fmt.Fprintf(h, "%d:%s", len(part), part) // length-prefixed: no two inputs run together
	}
	return idEncoding.EncodeToString(h.Sum(nil)[:16])
}

// InputDigest is the digest of a call a record keeps beside its
// idempotency key: the hex SHA-256 of its kind, its tool and its arguments
// in canonical JSON (object keys sorted, insignificant space dropped,
// numbers as written), so a retry that re-encodes the same arguments in
// another order matches and a call with other arguments does not. Absent,
// null and empty-object arguments are the same.
func InputDigest(kind, tool string, args json.RawMessage) string {
	canon := canonicalJSON(args)
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s%d:%s", len(kind), kind, len(tool), tool)
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil))
}

// canonicalJSON re-encodes v with sorted keys and no space; invalid JSON is
// kept as it is (byte for byte: only the same bytes match it).
func canonicalJSON(v json.RawMessage) []byte {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" || string(v) == "{}" {
		return []byte("{}")
	}
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		return v
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(x); err != nil {
		return v
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
