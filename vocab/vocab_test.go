package vocab_test

import (
	"fmt"
	"testing"

	"github.com/mcpqueue/mcpqueue/vocab"
)

func TestPlainName(t *testing.T) {
	for s, want := range map[string]bool{
		"":                           false,
		"a":                          true,
		"01JABCDEFGHJKMNPQRSTVWXYZ0": true,
		"tool_name-2":                true,
		"a.b":                        false, // a NATS subject separator
		"a*":                         false,
		">":                          false,
		"a b":                        false,
		"é":                          false,
		"a\x00":                      false,
	} {
		if got := vocab.PlainName(s); got != want {
			t.Errorf("PlainName(%q) = %v, want %v", s, got, want)
		}
	}
}

// PlainName tells a task id from a subject pattern.
func ExamplePlainName() {
	fmt.Println(vocab.PlainName("task-01J2"), vocab.PlainName("tasks.*"))
	// Output: true false
}
