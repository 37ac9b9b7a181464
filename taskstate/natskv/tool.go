package natskv

import (
	"encoding/json"
	"fmt"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

func encodeTool(t *taskstate.ToolInfo) ([]byte, error) {
	if t.Name == "" {
		return nil, fmt.Errorf("natskv: tool without a name")
	}
	return json.Marshal(t)
}

func decodeTool(b []byte) (*taskstate.ToolInfo, error) {
	var t taskstate.ToolInfo
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("natskv: decode tool: %w", err)
	}
	return &t, nil
}
