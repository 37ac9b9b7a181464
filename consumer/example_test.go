package consumer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/mcpqueue/mcpqueue/consumer"
)

// WordCountArgs are the tool's arguments. Handle infers the input schema
// from this type: a field without omitempty is required, the jsonschema tag
// is its description.
type WordCountArgs struct {
	Text string `json:"text" jsonschema:"the text to count the words of"`
	Max  int    `json:"max,omitempty" jsonschema:"stop counting here"`
}

// WordCount is the tool's result; its type gives the output schema.
type WordCount struct {
	Words int `json:"words"`
}

// Register a typed tool and print what the Mux publishes to the catalog:
// the name, how the tool may run, and the JSON Schemas api checks arguments
// against and clients see in tools/list.
func ExampleHandle() {
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{
		Name:        "word_count",
		Description: "Counts the words of a text.",
	}, func(ctx context.Context, c *consumer.Call[WordCountArgs]) (WordCount, error) {
		return WordCount{Words: len(strings.Fields(c.Args.Text))}, nil
	})

	for _, t := range mux.Tools() {
		fmt.Println(t.Name, t.TaskSupport)
		var in, out bytes.Buffer
		_ = json.Indent(&in, t.InputSchema, "", "  ")
		_ = json.Indent(&out, t.OutputSchema, "", "  ")
		fmt.Println("input:", in.String())
		fmt.Println("output:", out.String())
	}
	// Output:
	// word_count optional
	// input: {
	//   "type": "object",
	//   "properties": {
	//     "text": {
	//       "type": "string",
	//       "description": "the text to count the words of"
	//     },
	//     "max": {
	//       "type": "integer",
	//       "description": "stop counting here"
	//     }
	//   },
	//   "required": [
	//     "text"
	//   ],
	//   "additionalProperties": false
	// }
	// output: {
	//   "type": "object",
	//   "properties": {
	//     "words": {
	//       "type": "integer"
	//     }
	//   },
	//   "required": [
	//     "words"
	//   ],
	//   "additionalProperties": false
	// }
}

type ReadFileArgs struct {
	Path string `json:"path"`
}

// A handler returns consumer.ToolError for a failure the model should see and
// can act on (a missing file, a bad query): the task still completes, with a
// result whose isError is true and whose text is the error's message. Any
// other error fails the task with a JSON-RPC error instead.
//
// That result is written by the worker that runs the handler; the
// consumertest package's ExampleHarness_Call shows it without a
// broker. What the error itself shows is below: its message is the cause's
// (the result's text), it wraps the cause for errors.Is, and ToolError(nil)
// is nil, so it can wrap any error result.
func ExampleToolError() {
	read := func(ctx context.Context, c *consumer.Call[ReadFileArgs]) (*consumer.Result, error) {
		b, err := os.ReadFile(c.Args.Path)
		if errors.Is(err, os.ErrNotExist) {
			return nil, consumer.ToolError(fmt.Errorf("no file %s: list the directory first", c.Args.Path))
		}
		if err != nil {
			return nil, err // the task fails
		}
		return consumer.TextResult(string(b)), nil
	}
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "read_file"}, read)

	err := consumer.ToolError(fmt.Errorf("lookup: %w", os.ErrNotExist))
	fmt.Println(err)
	fmt.Println(errors.Is(err, os.ErrNotExist))
	fmt.Println(consumer.ToolError(nil) == nil)
	// Output:
	// lookup: file does not exist
	// true
	// true
}

// A handler returns consumer.Retryable when this run failed but another
// may not: here the process it relays the call to died. The job runs again
// (after a short backoff, on any worker) while the tool's attempts last;
// the last failure fails the task with the error's message. A failure the
// model should see and act on is a ToolError instead: it never runs again.
//
// A middleware (Mux.Use) tells the kinds apart with errors.As, as below;
// the error unwraps to its cause for errors.Is, and Retryable(nil) is nil.
func ExampleRetryable() {
	errChildDied := errors.New("child process died")
	relay := func(ctx context.Context, c *consumer.Call[ReadFileArgs]) (*consumer.Result, error) {
		return nil, consumer.Retryable(fmt.Errorf("relaying %s: %w", c.Args.Path, errChildDied))
	}
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "relay", MaxAttempts: 5}, relay)

	err := consumer.Retryable(fmt.Errorf("relaying notes.txt: %w", errChildDied))
	var re *consumer.RetryableError
	var te *consumer.ToolExecutionError
	fmt.Println(err)
	fmt.Println(errors.As(err, &re), errors.As(err, &te), errors.Is(err, errChildDied))
	fmt.Println(consumer.Retryable(nil) == nil)
	// Output:
	// relaying notes.txt: child process died
	// true false true
	// true
}
