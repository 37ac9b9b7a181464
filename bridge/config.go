package bridge

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/consumer"
)

// Server is one server as configured: the command (stdio) or the URL
// (Streamable HTTP), and how it is relayed.
type Server struct {
	Command
	// HTTP, when its URL is set, is a remote Streamable-HTTP server (and
	// Command is unused).
	HTTP HTTPServer
	// Name, Prefix, Sessions, Timeout, LogLevel and Roots as in Options.
	Name     string
	Prefix   string
	Sessions int
	Timeout  time.Duration
	LogLevel string
	Roots    bool
	// ToolTimeouts as in Options (the config's "tools": {name: {"timeout"}}).
	ToolTimeouts map[string]time.Duration
}

// ParseCommandLine splits a command line into words the way a POSIX shell
// splits a simple command: blanks separate words, single quotes keep
// everything literally, double quotes keep blanks and let a backslash
// escape ", \ and $, and a backslash outside quotes escapes the next
// character. Nothing is expanded ($VAR, ~ and globs stay as they are).
func ParseCommandLine(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("bridge: unterminated ' in %q", line)
			}
			cur.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && strings.IndexByte(`"\$`, line[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(line[i])
			}
			if i >= len(line) {
				return nil, fmt.Errorf("bridge: unterminated \" in %q", line)
			}
			inWord = true
		case c == '\\':
			if i+1 < len(line) {
				i++
				cur.WriteByte(line[i])
			}
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, errors.New("bridge: empty command")
	}
	return words, nil
}

// FromCommandLine is the server a --mcp-stdio command line describes: no
// environment but DefaultPath, the name the server gives itself.
func FromCommandLine(line string) (Server, error) {
	words, err := ParseCommandLine(line)
	if err != nil {
		return Server{}, err
	}
	return Server{Command: Command{Path: words[0], Args: words[1:]}}, nil
}

// fileServer is one entry of a configuration file's "mcpServers": the shape
// MCP hosts use (command, args, env), plus the bridge's own settings.
type fileServer struct {
	Type            string            `json:"type"` // "stdio", "http" or empty
	Command         string            `json:"command"`
	URL             string            `json:"url"`
	Headers         map[string]string `json:"headers"`
	Protocol        string            `json:"protocol"`        // task gateway: the upstream era (HTTPServer.Protocol)
	OAuth           *fileOAuth        `json:"oauth"`           // task gateway: HTTPServer.OAuth
	ForwardIdentity string            `json:"forwardIdentity"` // task gateway: HTTPServer.ForwardIdentity
	Args            []string          `json:"args"`
	Env             map[string]string `json:"env"`
	Cwd             string            `json:"cwd"`
	Prefix          string            `json:"prefix"`
	Concurrency     int               `json:"concurrency"`
	Timeout         string            `json:"timeout"`
	LogLevel        string            `json:"logLevel"`
	Roots           bool              `json:"roots"`
	Disabled        bool              `json:"disabled"`
	// Tools holds per-tool settings, by the server's tool name (task gateway).
	Tools map[string]fileTool `json:"tools"`
}

// fileOAuth is a server entry's "oauth": the client-credentials grant.
type fileOAuth struct {
	TokenURL     string   `json:"tokenUrl"`
	ClientID     string   `json:"clientId"`
	ClientSecret string   `json:"clientSecret"`
	Scopes       []string `json:"scopes"`
}

// auth is the entry's OAuth grant, its id and secret expanded as header
// values are (${VAR}, @/path).
func (f *fileOAuth) auth() (*OAuth, error) {
	o := &OAuth{TokenURL: f.TokenURL, Scopes: f.Scopes}
	var err error
	if o.ClientID, err = ExpandHeader(f.ClientID); err != nil {
		return nil, fmt.Errorf("oauth clientId: %w", err)
	}
	if o.ClientSecret, err = ExpandHeader(f.ClientSecret); err != nil {
		return nil, fmt.Errorf("oauth clientSecret: %w", err)
	}
	return o, o.check()
}

// fileTool is one tool's settings in a server entry's "tools".
type fileTool struct {
	Timeout string `json:"timeout"`
}

// LoadConfig reads a configuration file of servers, the JSON MCP hosts use:
//
//	{"mcpServers": {"everything": {
//	    "command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"],
//	    "env": {"HOME": "/var/lib/mcp"},
//	    "prefix": "ev.", "concurrency": 4, "timeout": "5m", "logLevel": "info", "roots": false,
//	    "tools": {"trigger-long-running-operation": {"timeout": "30m"}}}}}
//
// A server's key is its name. Its env is its whole environment (PATH
// defaults to DefaultPath); "concurrency" is Options.Sessions; "tools"
// gives single tools (by the server's name) a timeout of their own. Entries with
// "disabled": true are skipped; unknown fields are an error.
//
// A remote server (Streamable HTTP) has a "url" instead of a command, and
// "headers" sent on every request:
//
//	{"mcpServers": {"remote": {"url": "https://mcp.example.com/mcp",
//	    "headers": {"Authorization": "Bearer ${TOKEN}", "X-Key": "@/run/secrets/key"}}}}
//
// "protocol" pins the upstream's era, "2025-11-25" (initialize, a session)
// or "2026-07-28" (per-request framing; its tasks followed); without it
// server/discover is tried first, then initialize.
//
// "oauth": {"tokenUrl", "clientId", "clientSecret", "scopes"} fetches a
// bearer token with the OAuth client-credentials grant (refreshed before it
// expires and when the server answers 401); "forwardIdentity": "X-User"
// sends the task owner's subject in that header.
//
// In a header value (and oauth's clientId and clientSecret) ${VAR} is the worker's environment variable VAR (an
// unset one is an error), and a value "@/path" is the file's content
// (trailing blanks trimmed), so secrets need not be in the file.
func LoadConfig(path string) ([]Server, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	var file struct {
		MCPServers map[string]fileServer `json:"mcpServers"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf("bridge: %s: %w", path, err)
	}
	names := make([]string, 0, len(file.MCPServers))
	for n := range file.MCPServers {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Server
	for _, n := range names {
		f := file.MCPServers[n]
		if f.Disabled {
			continue
		}
		s, err := f.server(n)
		if err != nil {
			return nil, fmt.Errorf("bridge: %s: server %q: %w", path, n, err)
		}
		if f.Timeout != "" {
			if s.Timeout, err = time.ParseDuration(f.Timeout); err != nil {
				return nil, fmt.Errorf("bridge: %s: server %q: timeout: %w", path, n, err)
			}
		}
		for tool, tc := range f.Tools {
			d, err := time.ParseDuration(tc.Timeout)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("bridge: %s: server %q: tool %q: timeout %q: want a positive duration such as \"30s\"", path, n, tool, tc.Timeout)
			}
			if s.ToolTimeouts == nil {
				s.ToolTimeouts = map[string]time.Duration{}
			}
			s.ToolTimeouts[tool] = d
		}
		out = append(out, s)
	}
	return out, nil
}

// server checks an entry and makes it a Server (without its timeout).
func (f fileServer) server(name string) (s Server, err error) {
	s = Server{Name: name, Prefix: f.Prefix, Sessions: f.Concurrency, LogLevel: f.LogLevel, Roots: f.Roots}
	if f.Concurrency < 0 {
		return s, errors.New("negative concurrency")
	}
	switch {
	case f.Command != "" && f.URL != "":
		return s, errors.New(`both "command" and "url": a server is either a child process (stdio) or a remote server (Streamable HTTP)`)
	case f.URL != "":
		if f.Type != "" && f.Type != "http" && f.Type != "streamable-http" && f.Type != "streamableHttp" {
			return s, fmt.Errorf(`type %q with a "url": only Streamable-HTTP servers are relayed`, f.Type)
		}
		if len(f.Args) > 0 || len(f.Env) > 0 || f.Cwd != "" {
			return s, errors.New(`"args", "env" and "cwd" are for a command, not a "url"`)
		}
		if err := CheckURL(f.URL); err != nil {
			return s, err
		}
		if err := CheckProtocol(f.Protocol); err != nil {
			return s, err
		}
		s.HTTP = HTTPServer{URL: f.URL, Headers: map[string]string{}, Protocol: f.Protocol, ForwardIdentity: f.ForwardIdentity}
		if f.OAuth != nil {
			if s.HTTP.OAuth, err = f.OAuth.auth(); err != nil {
				return s, err
			}
			for k := range f.Headers {
				if strings.EqualFold(k, "Authorization") {
					return s, errors.New(`both "oauth" and an Authorization header: the grant's token is the Authorization`)
				}
			}
		}
		if f.ForwardIdentity != "" && !validHeaderName(f.ForwardIdentity) {
			return s, fmt.Errorf(`forwardIdentity %q is not a header name`, f.ForwardIdentity)
		}
		for k, v := range f.Headers {
			val, err := ExpandHeader(v)
			if err != nil {
				return s, fmt.Errorf("header %q: %w", k, err)
			}
			s.HTTP.Headers[k] = val
		}
	case f.Command != "":
		if f.Type != "" && f.Type != "stdio" {
			return s, fmt.Errorf(`type %q with a "command": only stdio child processes are run`, f.Type)
		}
		if len(f.Headers) > 0 {
			return s, errors.New(`"headers" are for a "url", not a command`)
		}
		if f.Protocol != "" || f.OAuth != nil || f.ForwardIdentity != "" {
			return s, errors.New(`"protocol", "oauth" and "forwardIdentity" are for a "url", not a command`)
		}
		s.Command = Command{Path: f.Command, Args: f.Args, Env: f.Env, Dir: f.Cwd}
	default:
		return s, errors.New(`needs a "command" or a "url"`)
	}
	return s, nil
}

// validHeaderName reports whether n is an HTTP header name (an RFC 9110
// token).
func validHeaderName(n string) bool {
	for _, r := range n {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return n != ""
}

var headerVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// ExpandHeader is a configured header value with ${VAR} replaced by the
// environment variable VAR, or, for "@/path", the file's content with
// trailing blanks trimmed. Errors name the variable or file, never a
// value.
func ExpandHeader(v string) (string, error) {
	if file, ok := strings.CutPrefix(v, "@"); ok {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		return strings.TrimRight(string(b), " \t\r\n"), nil
	}
	var missing []string
	out := headerVar.ReplaceAllStringFunc(v, func(m string) string {
		name := m[2 : len(m)-1]
		val, ok := os.LookupEnv(name)
		if !ok {
			missing = append(missing, name)
		}
		return val
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set", strings.Join(missing, ", "))
	}
	return out, nil
}

// FromURL is the server a --mcp-url describes: no headers, the name the
// server gives itself.
func FromURL(raw string) (Server, error) {
	if err := CheckURL(raw); err != nil {
		return Server{}, err
	}
	return Server{HTTP: HTTPServer{URL: raw}}, nil
}

// dialer is how the server's sessions are opened.
func (s Server) dialer(log zerolog.Logger) Dialer {
	if s.HTTP.URL != "" {
		return s.HTTP.Dialer(log.With().Str("server", cmp.Or(s.Name, s.HTTP.host())).Logger())
	}
	return s.Command.Dialer(log.With().Str("server", cmp.Or(s.Name, filepath.Base(s.Path))).Logger())
}

// Relays are the relays Start started.
type Relays []*Relay

// Close stops them all.
func (rs Relays) Close() error {
	for _, r := range rs {
		_ = r.Close()
	}
	return nil
}

// Start relays each server's tools into mux (see Serve); sessions is the
// default of Server.Sessions. On an error the ones started are stopped.
func Start(ctx context.Context, mux *consumer.Mux, servers []Server, sessions int, log zerolog.Logger) (Relays, error) {
	var out Relays
	for _, s := range servers {
		n := s.Sessions
		if n <= 0 {
			n = sessions
		}
		r, err := Serve(ctx, mux, s.dialer(log), &Options{
			Name: s.Name, Prefix: s.Prefix, Sessions: n, Timeout: s.Timeout, ToolTimeouts: s.ToolTimeouts, LogLevel: s.LogLevel, Roots: s.Roots, Logger: log,
		})
		if err != nil {
			out.Close()
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}
