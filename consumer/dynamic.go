package consumer

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// dynamic is what lets a Mux change while a Worker runs it: the groups
// Replace installed, the change signal a Worker waits on, and the Muxes
// narrowed from this one (Only) that follow its changes. Guarded by Mux.mu.
type dynamic struct {
	group     map[string]string // key → the group Replace installed it as
	changed   chan struct{}     // closed (and replaced) on every change
	only      map[string]bool   // a Mux made by Only: the keys it may hold
	followers []*Mux
}

// Replace installs sub's tools and prompts in m as group, in one step, in
// place of those an earlier Replace installed as group: ones sub lacks go,
// the others are added or replaced. A Worker running m follows: it
// publishes the new entries, removes the gone ones from the catalog and
// pulls the jobs of the new set of routes, while runs already going finish
// with the handler they started with. Tools registered on m otherwise
// (Handle, or another group) are never touched: sub naming one of them is
// an error, and nothing changes. A Mux made by Only from m follows m's
// Replace calls, narrowed to its names.
//
// The entries keep the middleware sub has at the time (Use), inside m's:
// a run passes through m's middleware, then sub's, then the handler.
//
// Replace is how tools that come from elsewhere at run time (another MCP
// server's, see package bridge) join and leave a running worker.
func (m *Mux) Replace(group string, sub *Mux) error {
	if group == "" {
		return fmt.Errorf("consumer: Replace needs a group name")
	}
	mw := sub.middleware()
	sub.mu.RLock()
	next := make(map[string]*entry, len(sub.tools))
	for k, e := range sub.tools {
		if len(mw) > 0 {
			wrapped := *e
			wrapped.run = wrap(e.info.Kind, mw, e.run)
			e = &wrapped
		}
		next[k] = e
	}
	sub.mu.RUnlock()
	return m.replace(group, next)
}

func (m *Mux) replace(group string, next map[string]*entry) error {
	m.mu.Lock()
	if m.dyn.only != nil {
		for k := range next {
			if !m.dyn.only[k] {
				delete(next, k)
			}
		}
	}
	var clash []string
	for k := range next {
		if _, there := m.tools[k]; there && m.dyn.group[k] != group {
			clash = append(clash, k)
		}
	}
	if len(clash) > 0 {
		m.mu.Unlock()
		sort.Strings(clash)
		return fmt.Errorf("consumer: Replace %q: %s registered here already (by Handle or another group)", group, strings.Join(clash, ", "))
	}
	for k, g := range m.dyn.group {
		if _, keep := next[k]; g == group && !keep {
			delete(m.tools, k)
			delete(m.dyn.group, k)
		}
	}
	if m.dyn.group == nil {
		m.dyn.group = map[string]string{}
	}
	for k, e := range next {
		m.tools[k] = e
		m.dyn.group[k] = group
	}
	m.changedLocked()
	followers := slices.Clone(m.dyn.followers)
	m.mu.Unlock()

	for _, f := range followers {
		copied := make(map[string]*entry, len(next))
		for k, e := range next {
			copied[k] = e
		}
		if err := f.replace(group, copied); err != nil {
			return err
		}
	}
	return nil
}

// followLocked makes out, narrowed from m to names, follow m's Replace
// calls. m.mu is held.
func (m *Mux) followLocked(out *Mux, names []string) {
	out.dyn.only = make(map[string]bool, len(names))
	for _, n := range names {
		out.dyn.only[n] = true
		if g, ok := m.dyn.group[n]; ok {
			if out.dyn.group == nil {
				out.dyn.group = map[string]string{}
			}
			out.dyn.group[n] = g
		}
	}
	m.dyn.followers = append(m.dyn.followers, out)
}

// changedLocked wakes whoever waits for a change of m. m.mu is held.
func (m *Mux) changedLocked() {
	if m.dyn.changed != nil {
		close(m.dyn.changed)
		m.dyn.changed = nil
	}
}

// changes returns a channel closed at m's next change.
func (m *Mux) changes() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dyn.changed == nil {
		m.dyn.changed = make(chan struct{})
	}
	return m.dyn.changed
}

// lookup is the entry of a catalog key, nil if m has none.
func (m *Mux) lookup(key string) *entry {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.tools[key]
}

// entries is a snapshot of m's entries by key.
func (m *Mux) entries() map[string]*entry {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[string]*entry, len(m.tools))
	for k, e := range m.tools {
		out[k] = e
	}
	return out
}
