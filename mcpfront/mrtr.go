package mcpfront

import (
	"bytes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/mcpqueue/mcpqueue/internal/mcpwire"
)

// requestState is what a multi-round (MRTR) call carries between rounds: the
// answers given so far and the requests of the last round. It travels to the
// client and back, so it is sealed (sealState): encrypted and authenticated
// with XChaCha20-Poly1305 under a key derived from the configured state key,
// with the owner key of the caller it was made for as associated data. The
// client reads nothing of it (not even the tool), and only the same owner can
// bring it back; any replica holding the same key opens it.
type requestState struct {
	Tool      string                     `json:"t"`
	ArgsHash  string                     `json:"h"`
	Answers   map[string]json.RawMessage `json:"a,omitempty"`
	Requested map[string]string          `json:"r"` // key → input method
	Expires   int64                      `json:"e"`
}

// stateVersion is the first byte of a sealed requestState. The signed,
// readable states of earlier versions ("payload.signature") are not base64
// at all and fail to open like any altered state.
const stateVersion = 2

// errBadState is the one answer for a requestState that does not open: altered,
// sealed under another key, of an older format, or made for another owner. The
// cases are not told apart, so a caller learns nothing about another's state.
var errBadState = errors.New("requestState integrity check failed (altered, sealed under another key, or issued to another caller); make the call again without it")

// newStateAEAD derives the requestState cipher from the configured key (any
// length; HKDF-SHA256 makes a 256-bit key of it).
func newStateAEAD(key []byte) cipher.AEAD {
	k, err := hkdf.Key(sha256.New, key, nil, "mcpqueue MRTR requestState v2", chacha20poly1305.KeySize)
	if err != nil {
		panic("mcpfront: deriving the requestState key: " + err.Error()) // only for an impossible length
	}
	aead, err := chacha20poly1305.NewX(k)
	if err != nil {
		panic("mcpfront: the requestState cipher: " + err.Error())
	}
	return aead
}

func argsDigest(tool string, args json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(args)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// stateAD is the associated data of owner's states: the version and the
// owner key ("" without authentication).
func stateAD(owner string) []byte {
	return append([]byte{stateVersion}, owner...)
}

// sealState encrypts st for owner: base64url(version ‖ nonce ‖ ciphertext).
func (s *Server) sealState(owner string, st *requestState) string {
	b, _ := json.Marshal(st)
	n := s.stateAEAD.NonceSize()
	out := make([]byte, 1+n, 1+n+len(b)+s.stateAEAD.Overhead())
	out[0] = stateVersion
	_, _ = rand.Read(out[1:]) // a random 192-bit nonce: no counter to share across replicas
	out = s.stateAEAD.Seal(out, out[1:], b, stateAD(owner))
	return base64.RawURLEncoding.EncodeToString(out)
}

// openState opens a state sealed for owner; anything else is errBadState.
func (s *Server) openState(owner, token string) (*requestState, error) {
	raw, err := base64.RawURLEncoding.Strict().DecodeString(token)
	n := s.stateAEAD.NonceSize()
	if err != nil || len(raw) < 1+n+s.stateAEAD.Overhead() || raw[0] != stateVersion {
		return nil, errBadState
	}
	b, err := s.stateAEAD.Open(nil, raw[1:1+n], raw[1+n:], stateAD(owner))
	if err != nil {
		return nil, errBadState
	}
	var st requestState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, errBadState
	}
	if s.cfg.Now().Unix() > st.Expires {
		return nil, fmt.Errorf("requestState has expired; call the tool again without it")
	}
	return &st, nil
}

// gatherAnswers merges the answers a retried call brings (inputResponses)
// with those carried in its requestState, after checking both.
// The state must have been made for owner.
func (s *Server) gatherAnswers(owner, tool string, p *callParams) (map[string]json.RawMessage, *rpcError) {
	args, rawResponses, token := p.Arguments, p.InputResponses, p.RequestState
	var st *requestState
	if token != "" {
		var err error
		if st, err = s.openState(owner, token); err != nil {
			return nil, invalidParams(err.Error())
		}
		if st.Tool != tool || st.ArgsHash != argsDigest(tool, args) {
			return nil, invalidParams("requestState belongs to a different call (tool or arguments changed)")
		}
	}
	answers := map[string]json.RawMessage{}
	if st != nil {
		for k, v := range st.Answers {
			answers[k] = v
		}
	}
	if rawResponses == nil { // absent; an explicit null is refused below
		return answers, nil
	}
	var responses map[string]json.RawMessage
	if err := json.Unmarshal(rawResponses, &responses); err != nil || responses == nil {
		return nil, invalidParams("invalid params: inputResponses must be an object mapping request keys to results")
	}
	for k, v := range responses {
		method := ""
		if st != nil {
			m, asked := st.Requested[k]
			if !asked {
				continue // not a request of the last round: ignored
			}
			method = m
		}
		if err := validateInputResponse(method, v); err != nil {
			return nil, invalidParams(fmt.Sprintf("invalid params: inputResponses[%q]: %v", k, err))
		}
		answers[k] = v
	}
	return answers, nil
}

// validateInputResponse checks an answer's shape for its request method
// (any object when the method is unknown).
func validateInputResponse(method string, v json.RawMessage) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil || m == nil {
		return fmt.Errorf("must be an object (the result of the input request)")
	}
	switch method {
	case "elicitation/create":
		var action string
		if err := json.Unmarshal(m["action"], &action); err != nil || (action != "accept" && action != "decline" && action != "cancel") {
			return fmt.Errorf(`an elicitation result needs "action": "accept", "decline" or "cancel"`)
		}
		if c, ok := m["content"]; ok && string(c) != "null" && (len(c) == 0 || c[0] != '{') {
			return fmt.Errorf(`"content" must be an object`)
		}
	case "sampling/createMessage":
		if _, ok := m["content"]; !ok {
			return fmt.Errorf(`a sampling result needs "content"`)
		}
		if _, ok := m["role"]; !ok {
			return fmt.Errorf(`a sampling result needs "role"`)
		}
	case "roots/list":
		if r, ok := m["roots"]; !ok || len(r) == 0 || r[0] != '[' {
			return fmt.Errorf(`a roots result needs a "roots" array`)
		}
	}
	return nil
}

// inputRequiredReply builds the MRTR answer from a run that needs input; its
// requestState opens only for owner.
func (s *Server) inputRequiredReply(owner, tool string, args json.RawMessage, answers map[string]json.RawMessage, outcome json.RawMessage) (map[string]any, error) {
	var o mcpwire.InputRequiredResult
	if err := json.Unmarshal(outcome, &o); err != nil {
		return nil, err
	}
	st := &requestState{
		Tool: tool, ArgsHash: argsDigest(tool, args), Answers: answers,
		Requested: make(map[string]string, len(o.InputRequests)),
		Expires:   s.cfg.Now().Add(s.cfg.RequestStateTTL).Unix(),
	}
	reqs := make(map[string]any, len(o.InputRequests))
	for k, r := range o.InputRequests {
		st.Requested[k] = r.Method
		reqs[k] = r
	}
	return map[string]any{
		"resultType":    resultInputRequired,
		"inputRequests": reqs,
		"requestState":  s.sealState(owner, st),
		"_meta":         s.resultMeta(),
	}, nil
}

// isInputRequired reports whether a stored result is an MRTR outcome.
func isInputRequired(result json.RawMessage) bool {
	if !bytes.Contains(result, []byte(resultInputRequired)) {
		return false // most results: no decode
	}
	var r struct {
		ResultType string `json:"resultType"`
	}
	_ = json.Unmarshal(result, &r)
	return r.ResultType == resultInputRequired
}
