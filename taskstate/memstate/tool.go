package memstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// PublishTool implements taskstate.Catalog: the entry is kept for
// Config.ToolRetention after this write.
func (s *Store) PublishTool(ctx context.Context, t *taskstate.ToolInfo) error {
	if t.Name == "" {
		return errors.New("memstate: publish: a catalog entry needs a name")
	}
	b, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("memstate: publish %s: %w", t.Key(), err)
	}
	s.putEntry(s.tools, t.Key(), b, s.cfg.ToolRetention)
	return nil
}

// Tool implements taskstate.Catalog.
func (s *Store) Tool(ctx context.Context, key string) (*taskstate.ToolInfo, error) {
	b, ok := s.entry(s.tools, key)
	if !ok {
		return nil, fmt.Errorf("%w: catalog entry %.200q", taskstate.ErrNotFound, key)
	}
	return decodeTool(b)
}

// Tools implements taskstate.Catalog.
func (s *Store) Tools(ctx context.Context) ([]*taskstate.ToolInfo, error) {
	now := time.Now()
	s.mu.Lock()
	keys := make([]string, 0, len(s.tools))
	for k := range s.tools {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var raw [][]byte
	for _, k := range keys {
		if b, ok := s.tools.get(k, now); ok {
			raw = append(raw, b)
		}
	}
	s.mu.Unlock()
	out := make([]*taskstate.ToolInfo, 0, len(raw))
	for _, b := range raw {
		t, err := decodeTool(b)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// RemoveTool implements taskstate.Catalog.
func (s *Store) RemoveTool(ctx context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tools.get(key, time.Now()); !ok {
		return fmt.Errorf("%w: catalog entry %.200q", taskstate.ErrNotFound, key)
	}
	delete(s.tools, key)
	return nil
}

func decodeTool(b []byte) (*taskstate.ToolInfo, error) {
	var t taskstate.ToolInfo
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("memstate: catalog entry: %w", err)
	}
	return &t, nil
}
