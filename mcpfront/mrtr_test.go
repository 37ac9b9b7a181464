package mcpfront

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/auth"
	"github.com/mcpqueue/mcpqueue/backend"
)

// The requestState tests: a state opens only for the owner it was made for,
// every other way of not opening answers alike, and nothing of it is readable.

const (
	stateTool   = "tool:test_input_required_result_multi_round"
	stateSecret = "alice-private-answer"
)

var (
	stateArgs   = json.RawMessage(`{"topic":"secret-topic-argument"}`)
	ownerAlice  = auth.Principal{Issuer: "https://issuer.test", Subject: "alice", Tenant: "t1"}.Owner()
	ownerBob    = auth.Principal{Issuer: "https://issuer.test", Subject: "bob", Tenant: "t2"}.Owner()
	ownerAliceB = auth.Principal{Issuer: "https://issuer.test", Subject: "alice", Tenant: "t2"}.Owner() // same subject, other tenant
	step2Answer = json.RawMessage(`{"step2":{"action":"accept","content":{"color":"blue"}}}`)
)

// stateServer is a front end with key and a clock the test moves.
func stateServer(key string, now *time.Time) *Server {
	return New(nil, backend.Backend{}, &Config{StateKey: []byte(key), Logger: zerolog.Nop(), Now: func() time.Time { return *now }})
}

// roundTwoState is the requestState of round 2 of a two-round call by owner:
// round 1's answer (stateSecret) inside, step2 asked.
func roundTwoState(t *testing.T, s *Server, owner string) string {
	t.Helper()
	answers := map[string]json.RawMessage{"step1": json.RawMessage(`{"action":"accept","content":{"name":"` + stateSecret + `"}}`)}
	outcome := json.RawMessage(`{"resultType":"input_required","inputRequests":{"step2":{"method":"elicitation/create","params":{"message":"Step 2: What is your favorite color?"}}}}`)
	reply, err := s.inputRequiredReply(owner, stateTool, stateArgs, answers, outcome)
	if err != nil {
		t.Fatal(err)
	}
	state, _ := reply["requestState"].(string)
	if state == "" {
		t.Fatalf("no requestState in %v", reply)
	}
	return state
}

// retry is round 2's retry by owner, carrying state and the step2 answer.
func retry(s *Server, owner, state string) (map[string]json.RawMessage, *rpcError) {
	return s.gatherAnswers(owner, stateTool, &callParams{Name: stateTool, Arguments: stateArgs, InputResponses: step2Answer, RequestState: state})
}

func TestRequestStateOpensForItsOwnerOnly(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := stateServer("the-state-key", &now)
	state := roundTwoState(t, s, ownerAlice)

	// The owner's retry has both answers: the state works.
	answers, rerr := retry(s, ownerAlice, state)
	if rerr != nil {
		t.Fatalf("the owner's retry: %v", rerr)
	}
	if !bytes.Contains(answers["step1"], []byte(stateSecret)) || !bytes.Contains(answers["step2"], []byte("blue")) {
		t.Fatalf("the owner's retry gathered %s", answers)
	}
	// Another replica with the same key opens it too.
	if _, rerr := retry(stateServer("the-state-key", &now), ownerAlice, state); rerr != nil {
		t.Fatalf("a replica sharing the key: %v", rerr)
	}

	// The tampered answer, the reference every refusal must equal.
	raw, _ := base64.RawURLEncoding.DecodeString(state)
	flipped := append([]byte(nil), raw...)
	flipped[len(flipped)/2] ^= 1
	_, tampered := retry(s, ownerAlice, base64.RawURLEncoding.EncodeToString(flipped))
	if tampered == nil {
		t.Fatal("a tampered state was accepted")
	}
	if tampered.Code != -32602 || !strings.Contains(tampered.Message, "integrity check failed") {
		t.Fatalf("a tampered state: %+v", tampered)
	}

	now2 := now
	for _, c := range []struct {
		name, owner, state string
		s                  *Server
	}{
		{"another principal in another tenant", ownerBob, state, s},
		{"the same subject in another tenant", ownerAliceB, state, s},
		{"an unauthenticated caller", "", state, s},
		{"a replica with another key (rotation)", ownerAlice, state, stateServer("the-next-key", &now2)},
		{"the old signed format, valid signature", ownerAlice, legacyState(t, "the-state-key", now), s},
		{"truncated", ownerAlice, state[:len(state)-4], s},
		{"an extra character", ownerAlice, state + "A", s},
		{"not base64", ownerAlice, "!" + state[1:], s},
		{"padded base64", ownerAlice, base64.URLEncoding.EncodeToString(raw), s},
		{"empty after the version", ownerAlice, base64.RawURLEncoding.EncodeToString(raw[:1]), s},
		{"another version byte", ownerAlice, base64.RawURLEncoding.EncodeToString(append([]byte{stateVersion + 1}, raw[1:]...)), s},
	} {
		got, rerr := retry(c.s, c.owner, c.state)
		if rerr == nil {
			t.Errorf("%s: accepted, gathered %s", c.name, got)
			continue
		}
		if !reflect.DeepEqual(rerr, tampered) {
			t.Errorf("%s: answered %+v; a tampered state answers %+v", c.name, rerr, tampered)
		}
	}

	// A state made for B is refused for A alike (no direction is special).
	if _, rerr := retry(s, ownerAlice, roundTwoState(t, s, ownerBob)); rerr == nil || !reflect.DeepEqual(rerr, tampered) {
		t.Errorf("B's state retried by A: %+v", rerr)
	}
	// Unauthenticated states open for unauthenticated callers only.
	anon := roundTwoState(t, s, "")
	if _, rerr := retry(s, "", anon); rerr != nil {
		t.Errorf("an unauthenticated state retried unauthenticated: %v", rerr)
	}
	if _, rerr := retry(s, ownerAlice, anon); rerr == nil || !reflect.DeepEqual(rerr, tampered) {
		t.Errorf("an unauthenticated state retried by A: %+v", rerr)
	}

	// Expiry: the owner is told; anyone else gets the tampered answer, so
	// not even the age of another's state shows.
	now = now.Add(s.cfg.RequestStateTTL + time.Second)
	if _, rerr := retry(s, ownerAlice, state); rerr == nil || !strings.Contains(rerr.Message, "expired") {
		t.Errorf("the owner's expired state: %+v", rerr)
	}
	if _, rerr := retry(s, ownerBob, state); rerr == nil || !reflect.DeepEqual(rerr, tampered) {
		t.Errorf("A's expired state retried by B: %+v; want %+v", rerr, tampered)
	}
}

// legacyState is a round-2 state in the signed, readable format of before
// (payload.signature, HMAC-SHA256 with the raw key).
func legacyState(t *testing.T, key string, now time.Time) string {
	t.Helper()
	b, err := json.Marshal(&requestState{
		Tool: stateTool, ArgsHash: argsDigest(stateTool, stateArgs),
		Answers:   map[string]json.RawMessage{"step1": json.RawMessage(`{"action":"accept","content":{"name":"` + stateSecret + `"}}`)},
		Requested: map[string]string{"step2": "elicitation/create"}, Expires: now.Add(time.Hour).Unix(),
	})
	if err != nil {
		t.Fatal(err)
	}
	p := base64.RawURLEncoding.EncodeToString(b)
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(p))
	return p + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// readable returns the secrets found in token, read as it is and decoded
// with each base64 alphabet (whole, or each "."-separated part).
func readable(token string, secrets ...string) []string {
	views := []string{token}
	for _, part := range append([]string{token}, strings.Split(token, ".")...) {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(part); err == nil {
				views = append(views, string(b))
			}
		}
	}
	var found []string
	for _, s := range secrets {
		for _, v := range views {
			if strings.Contains(v, s) {
				found = append(found, s)
				break
			}
		}
	}
	return found
}

func TestRequestStateUnreadable(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := stateServer("the-state-key", &now)
	secrets := []string{stateSecret, "test_input_required_result_multi_round", "secret-topic-argument", "step1", "step2", "elicitation/create"}
	// The check finds what the old format showed: it can fail.
	if found := readable(legacyState(t, "the-state-key", now), secrets...); len(found) < 4 {
		t.Fatalf("the check reads only %q of the old, readable state", found)
	}
	state := roundTwoState(t, s, ownerAlice)
	if found := readable(state, secrets...); len(found) > 0 {
		t.Errorf("the state shows %q in clear: %s", found, state)
	}
	// A fresh nonce each time: the same state never seals the same twice.
	if again := roundTwoState(t, s, ownerAlice); again == state {
		t.Errorf("two seals of the same state are equal: %s", state)
	}
}
