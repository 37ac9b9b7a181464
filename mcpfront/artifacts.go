package mcpfront

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// Artifacts are blobs a task's handler attached (consumer's Call.Artifact),
// named by taskstate.ArtifactURI and read with resources/read by the task's
// owner while the task is kept. The contents stream from the store: a text
// artifact of at most maxInlineText bytes comes back as text, any other as a
// base64 blob encoded on the way out.

// maxInlineText is the largest text artifact answered as "text" (read into
// memory to escape it); larger ones come back as "blob".
const maxInlineText = 1 << 20

// resourceNotFound is the answer for an unknown resource, of another
// principal's task included: -32602 on 2026-07-28, -32002 on 2025-11-25.
func resourceNotFound(uri string, legacy bool) *rpcError {
	code := vocab.CodeInvalidParams
	if legacy {
		code = vocab.CodeResourceNotFound
	}
	return errorf(code, http.StatusOK, "Resource not found: "+clip(uri)).withData(map[string]any{"uri": clip(uri)})
}

// readArtifact answers resources/read of uri when it is an artifact URI and
// reports true; false (nothing written) for any other URI.
func (s *Server) readArtifact(ctx context.Context, w http.ResponseWriter, id json.RawMessage, method, owner, uri string, legacy bool) bool {
	taskID, name, ok := taskstate.ParseArtifactURI(uri)
	if !ok {
		return false
	}
	t, rerr := s.ownedTask(ctx, method, taskID, owner)
	art, exists := taskstate.Artifact{}, false
	if rerr == nil {
		art, exists = t.Artifacts[name]
	}
	blobs, hasBlobs := s.store.(taskstate.Blobs)
	if rerr != nil || !exists || !hasBlobs {
		writeError(w, id, resourceNotFound(uri, legacy))
		return true
	}
	r, size, err := blobs.Blob(ctx, taskstate.BlobKey(taskID, "artifact/"+name))
	if errors.Is(err, taskstate.ErrNotFound) {
		writeError(w, id, resourceNotFound(uri, legacy))
		return true
	}
	if err != nil {
		s.internalError(w, id, "reading an artifact", err)
		return true
	}
	defer r.Close()
	head := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	head = append(head, `,"result":{`...)
	if !legacy {
		// A 2026-07-28 resources/read result carries its caching hint: an
		// artifact is its owner's alone, and not cached (it goes with its
		// task).
		head = append(head, `"resultType":"complete","ttlMs":0,"cacheScope":"private",`...)
	}
	head = append(head, `"contents":[{"uri":`...)
	head = appendString(head, uri)
	if art.MimeType != "" {
		head = append(head, `,"mimeType":`...)
		head = appendString(head, art.MimeType)
	}
	tail := []byte(`}]`)
	if !legacy {
		tail = append(tail, `,"_meta":`...)
		tail = s.appendResultMeta(tail)
	}
	tail = append(tail, "}}"...)
	w.Header()["Content-Type"] = []string{"application/json"}
	if isText(art.MimeType) && size <= maxInlineText {
		b, err := io.ReadAll(r)
		if err != nil {
			s.internalError(w, id, "reading an artifact", err)
			return true
		}
		head = append(head, `,"text":`...)
		head = appendString(head, string(b))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(append(head, tail...))
		return true
	}
	head = append(head, `,"blob":"`...)
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(head); err != nil {
		return true
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := base64.NewEncoder(base64.StdEncoding, bw)
	if _, err := io.Copy(enc, r); err != nil {
		s.log.Error().Err(err).Str("uri", uri).Msg("streaming an artifact: the reply is cut short")
		return true
	}
	_ = enc.Close()
	_, _ = bw.WriteString(`"`)
	_, _ = bw.Write(tail)
	_ = bw.Flush()
	return true
}

func isText(mime string) bool {
	return strings.HasPrefix(mime, "text/") || mime == "application/json"
}

// uriParam reads params.uri of resources/read.
func uriParam(params json.RawMessage) (string, *rpcError) {
	var p struct {
		URI *string `json:"uri"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.URI == nil || *p.URI == "" {
		return "", invalidParams(`invalid params: resources/read needs a "uri" string`)
	}
	return *p.URI, nil
}
