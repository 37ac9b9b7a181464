package mcpfront

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// The replies of the task path (tools/call → task handle, tasks/get, inline
// results) are appended as JSON directly, in one pass, without building maps
// for encoding/json to sort and reflect over: they are most of what the api
// writes. The output is what encoding/json would write for the same values,
// up to the order of object keys.

// appendString appends s as a JSON string, escaped as encoding/json escapes
// it (HTML characters included).
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // the rare string that needs escapes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendResultMeta appends the _meta every 2026-07-28 result carries.
func (s *Server) appendResultMeta(b []byte) []byte {
	b = append(b, `{"`+metaServerInfo+`":{"name":`...)
	b = appendString(b, s.cfg.Name)
	b = append(b, `,"version":`...)
	b = appendString(b, s.cfg.Version)
	return append(b, "}}"...)
}

func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendTask appends a task as a 2026-07-28 result: its fields and rt as
// resultType; with detailed (tasks/get), also what its status implies: the
// result, the error or the open input requests.
func (s *Server) appendTask(b []byte, t *taskstate.Task, rt string, detailed bool) []byte {
	b = s.appendTaskHead(b, t, rt)
	if detailed {
		switch t.Status {
		case taskstate.Completed:
			b = append(b, `,"result":`...)
			b = appendReshaped(b, t.Result, resultComplete, nil)
		case taskstate.Failed:
			e := t.Error
			if e == nil {
				e = &taskstate.RPCError{Code: vocab.CodeInternalError, Message: "task failed"}
			}
			b = append(b, `,"error":`...)
			b = appendMarshal(b, e)
		case taskstate.InputRequired:
			b = append(b, `,"inputRequests":`...)
			b = appendMarshal(b, t.InputRequests)
		}
	}
	return s.appendTaskTail(b)
}

// appendTaskTail closes what appendTaskHead opened.
func (s *Server) appendTaskTail(b []byte) []byte {
	b = append(b, `,"_meta":`...)
	b = s.appendResultMeta(b)
	return append(b, '}')
}

// appendTaskHead appends a task's own fields, the object left open.
func (s *Server) appendTaskHead(b []byte, t *taskstate.Task, rt string) []byte {
	b = append(b, `{"resultType":`...)
	b = appendString(b, rt)
	b = append(b, ',')
	return s.appendTaskFields(b, t)
}

// appendTaskFields appends a task's own fields as object members.
func (s *Server) appendTaskFields(b []byte, t *taskstate.Task) []byte {
	b = append(b, `"taskId":`...)
	b = appendString(b, t.ID)
	b = append(b, `,"status":`...)
	b = appendString(b, string(t.Status))
	b = append(b, `,"createdAt":`...)
	b = appendTime(b, t.CreatedAt)
	b = append(b, `,"lastUpdatedAt":`...)
	b = appendTime(b, t.LastUpdatedAt)
	b = append(b, `,"ttlMs":`...)
	if t.TTLMs > 0 {
		b = strconv.AppendInt(b, t.TTLMs, 10)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"pollIntervalMs":`...)
	b = strconv.AppendInt(b, s.pollInterval(t), 10)
	if t.StatusMessage != "" {
		b = append(b, `,"statusMessage":`...)
		b = appendString(b, t.StatusMessage)
	}
	return b
}

func appendMarshal(b []byte, v any) []byte {
	j, err := json.Marshal(v)
	if err != nil {
		return append(b, "null"...)
	}
	return append(b, j...)
}

// createTaskResult is the answer that hands out a task.
func (s *Server) createTaskResult(t *taskstate.Task) json.RawMessage {
	return s.appendTask(make([]byte, 0, 384), t, resultTask, false)
}

// detailedTask is tasks/get's answer: the task plus what its status implies.
func (s *Server) detailedTask(t *taskstate.Task) json.RawMessage {
	return s.appendTask(make([]byte, 0, 384+len(t.Result)), t, resultComplete, true)
}

// reshape re-encodes a stored result (CallToolResult or GetPromptResult) for
// the wire: it sets resultType (unless rt is "") and adds meta's entries (an
// encoded object, or nil) to the result's own _meta.
func reshape(result json.RawMessage, rt string, meta json.RawMessage) json.RawMessage {
	return appendReshaped(make([]byte, 0, len(result)+96+len(meta)), result, rt, meta)
}

func appendReshaped(b []byte, result json.RawMessage, rt string, meta json.RawMessage) []byte {
	// Stored results are compact JSON written by encoding/json. One that is
	// an object with neither key to be set is spliced as it is; any other
	// goes through a map (the key check is by substring: a nested
	// "resultType" only costs the slow path).
	in := bytes.TrimSpace(result)
	if len(in) >= 2 && in[0] == '{' && in[len(in)-1] == '}' &&
		(rt == "" || !bytes.Contains(in, []byte(`"resultType"`))) &&
		(len(meta) == 0 || !bytes.Contains(in, []byte(`"_meta"`))) {
		body := bytes.TrimSpace(in[1 : len(in)-1])
		b = append(b, '{')
		if rt != "" {
			b = append(b, `"resultType":`...)
			b = appendString(b, rt)
			if len(body) > 0 {
				b = append(b, ',')
			}
		}
		b = append(b, body...)
		if len(meta) > 0 {
			if len(body) > 0 || rt != "" {
				b = append(b, ',')
			}
			b = append(b, `"_meta":`...)
			b = append(b, meta...)
		}
		return append(b, '}')
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(result, &m); err != nil || m == nil {
		m = map[string]json.RawMessage{"content": json.RawMessage("[]")}
	}
	if rt != "" {
		m["resultType"], _ = json.Marshal(rt)
	}
	if len(meta) > 0 {
		var own, add map[string]json.RawMessage
		_ = json.Unmarshal(m["_meta"], &own)
		_ = json.Unmarshal(meta, &add)
		if own == nil {
			own = map[string]json.RawMessage{}
		}
		for k, v := range add {
			own[k] = v
		}
		m["_meta"], _ = json.Marshal(own)
	}
	return appendMarshal(b, m)
}

// writeRaw writes a JSON-RPC result already encoded (valid JSON).
func writeRaw(w http.ResponseWriter, id json.RawMessage, result json.RawMessage) {
	b := make([]byte, 0, len(result)+len(id)+32)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	b = append(b, '}')
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// relatedTaskMeta is the _meta naming the task a 2025-11-25 message belongs to.
func relatedTaskMeta(id string) json.RawMessage {
	b := []byte(`{"` + metaRelatedTask + `":{"taskId":`)
	b = appendString(b, id)
	return append(b, "}}"...)
}
