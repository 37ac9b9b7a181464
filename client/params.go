package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
)

// Parameter headers (SEP-2243): a tool whose input schema marks a property
// "x-mcp-header": "<Name>" wants that argument mirrored in the header
// Mcp-Param-<Name> on the 2026-07-28 wire. The client learns a tool's marks
// from tools/list the first time a server refuses a call for a missing
// header (-32020 naming Mcp-Param-), and sends them from then on.

// headerParam is one marked property: its header name and its path.
type headerParam struct {
	name string
	path []string
}

// markedParams walks schema's properties (nested objects included).
func markedParams(schema json.RawMessage) []headerParam {
	var root map[string]any
	if json.Unmarshal(schema, &root) != nil {
		return nil
	}
	var out []headerParam
	var walk func(node map[string]any, path []string)
	walk = func(node map[string]any, path []string) {
		if name, ok := node["x-mcp-header"].(string); ok && name != "" && len(path) > 0 {
			out = append(out, headerParam{name: name, path: slices.Clone(path)})
		}
		props, _ := node["properties"].(map[string]any)
		for k, v := range props {
			if child, ok := v.(map[string]any); ok {
				walk(child, append(path, k))
			}
		}
	}
	walk(root, nil)
	return out
}

// paramHeaders are the Mcp-Param-* headers of args for params.
func paramHeaders(params []headerParam, args json.RawMessage) map[string]string {
	if len(params) == 0 {
		return nil
	}
	var body map[string]any
	d := json.NewDecoder(bytes.NewReader(args))
	d.UseNumber()
	if d.Decode(&body) != nil {
		return nil
	}
	out := map[string]string{}
	for _, p := range params {
		var cur any = body
		for _, k := range p.path {
			m, _ := cur.(map[string]any)
			cur = m[k]
		}
		switch v := cur.(type) {
		case string:
			out["Mcp-Param-"+p.name] = paramValue(v)
		case bool, json.Number:
			out["Mcp-Param-"+p.name] = paramValue(jsonText(v))
		}
	}
	return out
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// paramValue is a parameter value as a header: as it is when it is visible
// ASCII without surrounding space, else =?base64?…?=.
func paramValue(v string) string {
	if strings.TrimSpace(v) != v {
		return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
	}
	return headerValue(v)
}

// needsParams reports whether err refuses a call for its parameter headers.
func needsParams(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == -32020 && strings.Contains(e.Message, "Mcp-Param-")
}

// paramsOf returns tool's marked parameters: known ones, or (learn) read
// from tools/list.
func (c *Client) paramsOf(ctx context.Context, tool string, learn bool) ([]headerParam, error) {
	c.state.Lock()
	p, ok := c.params[tool]
	c.state.Unlock()
	if ok || !learn {
		return p, nil
	}
	tools, err := c.listTools(ctx, Version2026)
	if err != nil {
		return nil, err
	}
	c.state.Lock()
	defer c.state.Unlock()
	if c.params == nil {
		c.params = map[string][]headerParam{}
	}
	for _, t := range tools {
		c.params[t.Name] = markedParams(t.InputSchema)
	}
	return c.params[tool], nil
}
