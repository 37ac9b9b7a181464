package mcpfront

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// requestState is what a multi-round (MRTR) call carries between rounds: the
// answers given so far and the requests of the last round. It travels to the
// client and back, so it is signed with an HMAC; any replica holding the same
// key can verify it.
type requestState struct {
	Tool      string                     `json:"t"`
	ArgsHash  string                     `json:"h"`
	Answers   map[string]json.RawMessage `json:"a,omitempty"`
	Requested map[string]string          `json:"r"` // key → input method
	Expires   int64                      `json:"e"`
}

func argsDigest(tool string, args json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(args)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func (s *Server) sealState(st *requestState) string {
	b, _ := json.Marshal(st)
	p := base64.RawURLEncoding.EncodeToString(b)
	m := hmac.New(sha256.New, s.stateKey)
	m.Write([]byte(p))
	return p + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (s *Server) openState(token string) (*requestState, error) {
	p, sig, ok := strings.Cut(token, ".")
	if !ok {
		return nil, fmt.Errorf("requestState integrity check failed")
	}
	want, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return nil, fmt.Errorf("requestState integrity check failed")
	}
	m := hmac.New(sha256.New, s.stateKey)
	m.Write([]byte(p))
	if !hmac.Equal(m.Sum(nil), want) {
		return nil, fmt.Errorf("requestState integrity check failed")
	}
	b, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return nil, fmt.Errorf("requestState integrity check failed")
	}
	var st requestState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("requestState integrity check failed")
	}
	if s.cfg.Now().Unix() > st.Expires {
		return nil, fmt.Errorf("requestState has expired; call the tool again without it")
	}
	return &st, nil
}

// gatherAnswers merges the answers a retried call brings (inputResponses)
// with those carried in its requestState, after checking both.
func (s *Server) gatherAnswers(tool string, p *callParams) (map[string]json.RawMessage, *rpcError) {
	args, rawResponses, token := p.Arguments, p.InputResponses, p.RequestState
	var st *requestState
	if token != "" {
		var err error
		if st, err = s.openState(token); err != nil {
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

// inputRequiredReply builds the MRTR answer from a run that needs input.
func (s *Server) inputRequiredReply(tool string, args json.RawMessage, answers map[string]json.RawMessage, outcome json.RawMessage) (map[string]any, error) {
	var o struct {
		InputRequests map[string]struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		} `json:"inputRequests"`
	}
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
		reqs[k] = map[string]any{"method": r.Method, "params": r.Params}
	}
	return map[string]any{
		"resultType":    resultInputRequired,
		"inputRequests": reqs,
		"requestState":  s.sealState(st),
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
