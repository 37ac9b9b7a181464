package cli

import (
	"strings"
	"testing"
)

func TestAsynqQueueFlags(t *testing.T) {
	o := &Options{Prefix: "mcpq", AsynqQueues: "render_report=6, bulk_export=1"}
	c, err := o.redisOptions()
	if err != nil {
		t.Fatal(err)
	}
	if c.Prefix != "mcpq" || c.Priorities["render_report"] != 6 || c.Priorities["bulk_export"] != 1 || len(c.Priorities) != 2 {
		t.Fatalf("config %+v", c)
	}
	for _, bad := range []struct{ queues, tools, want string }{
		{"reports", "", "not tool=priority"},
		{"reports=0", "", "positive integer"},
		{"reports=x", "", "positive integer"},
		{"=2", "", "not tool=priority"},
		{"", "render=reports", "--asynq-tool-queues (MCPQ_ASYNQ_TOOL_QUEUES) was removed"},
	} {
		o := &Options{Prefix: "mcpq", AsynqQueues: bad.queues, AsynqToolQueues: bad.tools}
		if _, err := o.redisOptions(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("queues %q tools %q: error %v, want %q", bad.queues, bad.tools, err, bad.want)
		}
	}
}
