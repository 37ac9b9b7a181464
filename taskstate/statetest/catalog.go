package statetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

func tool(name string) *taskstate.ToolInfo {
	return &taskstate.ToolInfo{
		Name:         name,
		Title:        "Tool " + name,
		Description:  "does " + name,
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}`),
		OutputSchema: json.RawMessage(`{"type":"object"}`),
		Annotations:  json.RawMessage(`{"readOnlyHint":true}`),
		TaskSupport:  taskstate.TaskOptional,
		TimeoutMs:    60_000,
		Pool:         "default",
		LiveUntil:    time.Date(2031, 1, 2, 3, 4, 5, 600_000_000, time.UTC),
	}
}

func sameTool(t *testing.T, what string, got, want *taskstate.ToolInfo) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("%s: tool differs\n got %s\nwant %s", what, g, w)
	}
}

func (e *env) publish(t *testing.T, ti *taskstate.ToolInfo) {
	t.Helper()
	if err := e.cat.PublishTool(e.ctx, ti); err != nil {
		t.Fatalf("PublishTool(%s): %v", ti.Name, err)
	}
}

func (e *env) tool(t *testing.T, name string) *taskstate.ToolInfo {
	t.Helper()
	got, err := e.cat.Tool(e.ctx, name)
	if err != nil {
		t.Fatalf("Tool(%s): %v", name, err)
	}
	return got
}

func (e *env) toolNames(t *testing.T) []string {
	t.Helper()
	list, err := e.cat.Tools(e.ctx)
	if err != nil {
		t.Fatalf("Tools: %v", err)
	}
	names := make([]string, len(list))
	for i, ti := range list {
		names[i] = ti.Name
	}
	return names
}

func (s *suite) catalogRoundTrip(t *testing.T, e *env) {
	if names := e.toolNames(t); len(names) != 0 {
		t.Fatalf("fresh catalog lists %v, want nothing", names)
	}
	want := tool("render_report")
	want.TaskSupport = taskstate.TaskRequired
	e.publish(t, want)
	sameTool(t, "Tool after PublishTool", e.tool(t, want.Name), want)

	minimal := &taskstate.ToolInfo{Name: "min", InputSchema: json.RawMessage(`{"type":"object"}`), TaskSupport: taskstate.TaskForbidden}
	e.publish(t, minimal)
	sameTool(t, "minimal tool", e.tool(t, "min"), minimal)

	if err := e.cat.PublishTool(e.ctx, &taskstate.ToolInfo{InputSchema: json.RawMessage(`{}`)}); err == nil {
		t.Error("PublishTool of a tool without a name succeeded")
	}
}

// An operator removes an entry; it is gone from Tool and Tools at once for
// this store, and a worker publishing it again brings it back.
func (s *suite) catalogRemove(t *testing.T, e *env) {
	e.publish(t, tool("gone.soon"))
	e.publish(t, tool("stays"))
	if err := e.cat.RemoveTool(e.ctx, "gone.soon"); err != nil {
		t.Fatalf("RemoveTool: %v", err)
	}
	if _, err := e.cat.Tool(e.ctx, "gone.soon"); !errors.Is(err, taskstate.ErrNotFound) {
		t.Fatalf("Tool after RemoveTool: %v, want ErrNotFound", err)
	}
	if names := e.toolNames(t); len(names) != 1 || names[0] != "stays" {
		t.Fatalf("Tools() after RemoveTool = %v, want [stays]", names)
	}
	if err := e.cat.RemoveTool(e.ctx, "gone.soon"); !errors.Is(err, taskstate.ErrNotFound) {
		t.Fatalf("RemoveTool of a removed tool: %v, want ErrNotFound", err)
	}
	if err := e.cat.RemoveTool(e.ctx, "never"); !errors.Is(err, taskstate.ErrNotFound) {
		t.Fatalf("RemoveTool of an unknown tool: %v, want ErrNotFound", err)
	}
	e.publish(t, tool("gone.soon"))
	sameTool(t, "republished after RemoveTool", e.tool(t, "gone.soon"), tool("gone.soon"))
}

func (s *suite) catalogSorted(t *testing.T, e *env) {
	for _, n := range []string{"zeta", "alpha", "Mid", "beta.two", "beta", "beta_two", "0num"} {
		e.publish(t, tool(n))
	}
	want := []string{"0num", "Mid", "alpha", "beta", "beta.two", "beta_two", "zeta"}
	list, err := e.cat.Tools(e.ctx)
	if err != nil {
		t.Fatalf("Tools: %v", err)
	}
	got := make([]string, len(list))
	for i, ti := range list {
		got[i] = ti.Name
		sameTool(t, "Tools entry "+ti.Name, ti, tool(ti.Name))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("Tools() names = %v, want %v (sorted by name)", got, want)
	}
}

func (s *suite) catalogRepublish(t *testing.T, e *env) {
	v1 := tool("report")
	e.publish(t, v1)
	sameTool(t, "Tool after first publish", e.tool(t, "report"), v1)
	v2 := tool("report")
	v2.Description = "version two"
	v2.InputSchema = json.RawMessage(`{"type":"object","properties":{"y":{"type":"string"}}}`)
	v2.TaskSupport = taskstate.TaskForbidden
	e.publish(t, v2)
	sameTool(t, "Tool after republish", e.tool(t, "report"), v2)
	v3 := *v2
	v3.Pool = "gpu" // another pool publishes the tool: the last refresh names it
	e.publish(t, &v3)
	sameTool(t, "Tool after a refresh by another pool", e.tool(t, "report"), &v3)
	if names := e.toolNames(t); len(names) != 1 || names[0] != "report" {
		t.Fatalf("Tools() after republishing one tool = %v, want [report]", names)
	}
}

func (s *suite) catalogUnknown(t *testing.T, e *env) {
	e.publish(t, tool("known"))
	for _, name := range []string{"unknown", "Known", "", "known.", "*", ">"} {
		if got, err := e.cat.Tool(e.ctx, name); !errors.Is(err, taskstate.ErrNotFound) {
			t.Errorf("Tool(%q) = %v, %v; want ErrNotFound", name, got, err)
		}
	}
}

func (s *suite) catalogNamesDistinct(t *testing.T, e *env) {
	// Names that a careless key mapping would fold together.
	names := []string{"a.b", "a_b", "a-b", "a=2eb", "a=b", "A.B"}
	for _, n := range names {
		ti := tool(n)
		ti.Description = "I am " + n
		e.publish(t, ti)
	}
	for _, n := range names {
		if got := e.tool(t, n); got.Name != n || got.Description != "I am "+n {
			t.Errorf("Tool(%q) = %q (%q): names collided", n, got.Name, got.Description)
		}
	}
	if got := e.toolNames(t); len(got) != len(names) {
		t.Fatalf("Tools() = %v, want %d distinct tools", got, len(names))
	}
}

// A tool and a prompt may share a name; they are addressed by Key.
func (s *suite) catalogKindsDistinct(t *testing.T, e *env) {
	ti := tool("summary")
	ti.Description = "the tool"
	pr := tool("summary")
	pr.Kind = taskstate.KindPrompt
	pr.Description = "the prompt"
	e.publish(t, ti)
	e.publish(t, pr)
	if got := e.tool(t, "summary"); got.Kind != taskstate.KindTool || got.Description != "the tool" {
		t.Errorf("Tool(summary) = %+v, want the tool", got)
	}
	if got := e.tool(t, pr.Key()); got.Kind != taskstate.KindPrompt || got.Description != "the prompt" {
		t.Errorf("Tool(%q) = %+v, want the prompt", pr.Key(), got)
	}
	if got := e.toolNames(t); len(got) != 2 {
		t.Fatalf("Tools() = %v, want the tool and the prompt", got)
	}
}

func (s *suite) catalogExpiry(t *testing.T, e *env) {
	ttl := s.opts.ToolRetention
	if ttl <= 0 {
		t.Skip("statetest.Options.ToolRetention not set")
	}
	published := time.Now()
	e.publish(t, tool("stale"))
	e.publish(t, tool("fresh"))
	e.tool(t, "stale")

	// Keep "fresh" alive the way a worker's heartbeat does until "stale" is
	// gone and "fresh" has outlived its first publish by half a TTL.
	refreshed := time.Now()
	staleGone := time.Duration(0)
	eventually(t, 2*ttl+s.opts.Wait, "expiry of an unrefreshed tool", func() (bool, error) {
		if time.Since(refreshed) > ttl/4 {
			if err := e.cat.PublishTool(e.ctx, tool("fresh")); err != nil {
				return false, err
			}
			refreshed = time.Now()
		}
		_, err := e.cat.Tool(e.ctx, "stale")
		switch {
		case errors.Is(err, taskstate.ErrNotFound):
			if staleGone == 0 {
				staleGone = time.Since(published)
			}
		case err != nil:
			return false, err
		case staleGone != 0:
			return false, fmt.Errorf("expired tool came back")
		}
		return staleGone != 0 && time.Since(published) > ttl+ttl/2, nil
	})
	if staleGone < ttl/2 {
		t.Fatalf("tool with a %s TTL expired after only %s", ttl, staleGone)
	}
	sameTool(t, "refreshed tool", e.tool(t, "fresh"), tool("fresh"))
	if names := e.toolNames(t); len(names) != 1 || names[0] != "fresh" {
		t.Fatalf("Tools() = %v, want [fresh]", names)
	}
}
