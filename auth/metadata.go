package auth

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// WellKnownPath is where protected resource metadata lives (RFC 9728 §3).
const WellKnownPath = "/.well-known/oauth-protected-resource"

// Metadata is the OAuth 2.0 protected resource metadata of the MCP endpoint
// (RFC 9728 §2): which resource this is, which authorization servers issue
// tokens for it and how tokens are presented.
type Metadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers,omitempty"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// MetadataHandler serves m as JSON to GET and HEAD, readable by browser
// clients from any origin (it is public).
func MetadataHandler(m Metadata) http.Handler {
	body, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("auth: encoding resource metadata: %v", err))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		switch r.Method {
		case http.MethodGet, http.MethodHead:
		case http.MethodOptions:
			h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
			w.WriteHeader(http.StatusNoContent)
			return
		default:
			h.Set("Allow", "GET, HEAD, OPTIONS")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "public, max-age=300")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(body)
	})
}

// MetadataURL is the well-known metadata URL of a resource (RFC 9728 §3.1):
// the well-known path goes between the host and the resource's path, so
// https://mcp.example.com/mcp has its metadata at
// https://mcp.example.com/.well-known/oauth-protected-resource/mcp.
func MetadataURL(resource string) (string, error) {
	u, err := url.Parse(resource)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.Fragment != "" {
		return "", fmt.Errorf("auth: resource %q is not an absolute http(s) URL without a fragment", resource)
	}
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	return u.Scheme + "://" + u.Host + WellKnownPath + path, nil
}
