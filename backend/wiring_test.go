package backend

import (
	"strings"
	"testing"
)

func TestAsynqQueueFlags(t *testing.T) {
	o := &Options{Prefix: "mcpq", AsynqQueues: "reports=6, bulk=1", AsynqToolQueues: "render_report=reports"}
	c, err := o.asynqConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.Queues["mcpq"] != 1 || c.Queues["mcpq.reports"] != 6 || c.Queues["mcpq.bulk"] != 1 || len(c.Queues) != 3 {
		t.Fatalf("queues %v", c.Queues)
	}
	if c.ToolQueues["render_report"] != "mcpq.reports" {
		t.Fatalf("tool queues %v", c.ToolQueues)
	}
	for _, bad := range []struct{ queues, tools, want string }{
		{"reports", "", "not name=value"},
		{"reports=0", "", "positive integer"},
		{"reports=x", "", "positive integer"},
		{"reports=2", "render=missing", "does not list"},
		{"", "render", "not name=value"},
	} {
		o := &Options{Prefix: "mcpq", AsynqQueues: bad.queues, AsynqToolQueues: bad.tools}
		if _, err := o.asynqConfig(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("queues %q tools %q: error %v, want %q", bad.queues, bad.tools, err, bad.want)
		}
	}
}
