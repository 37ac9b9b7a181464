package client_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcpqueue/mcpqueue/client"
	"github.com/mcpqueue/mcpqueue/consumer"
)

type ReportArgs struct {
	Title string `json:"title"`
	Pages int    `json:"pages"`
}

type WaitArgs struct {
	Ms int `json:"ms"`
}

type ConfirmArgs struct {
	Action string `json:"action"`
}

// exampleTools are the tools the examples' server runs.
func exampleTools() *consumer.Mux {
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "render_report"},
		func(ctx context.Context, c *consumer.Call[ReportArgs]) (*consumer.Result, error) {
			return consumer.TextResult(fmt.Sprintf("%q: %d pages rendered", c.Args.Title, c.Args.Pages)), nil
		})
	consumer.Handle(mux, consumer.Tool{Name: "wait"},
		func(ctx context.Context, c *consumer.Call[WaitArgs]) (*consumer.Result, error) {
			select {
			case <-time.After(time.Duration(c.Args.Ms) * time.Millisecond):
				return consumer.TextResult("waited"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	consumer.Handle(mux, consumer.Tool{Name: "confirm_action"},
		func(ctx context.Context, c *consumer.Call[ConfirmArgs]) (*consumer.Result, error) {
			r, err := c.Elicit(ctx, "confirm", "Go ahead with "+c.Args.Action+"?", map[string]any{
				"type": "object", "properties": map[string]any{"confirm": map[string]any{"type": "boolean"}},
			})
			if err != nil {
				return nil, err
			}
			if ok, _ := r.Content["confirm"].(bool); r.Action != "accept" || !ok {
				return consumer.TextResult("Not done: " + c.Args.Action), nil
			}
			return consumer.TextResult("Confirmed: " + c.Args.Action), nil
		})
	return mux
}

// Call runs a tool as a task (the server offers the tasks extension) and
// returns its result once the task completed. The server here is an
// mcpqueue api and worker in this process, on the in-memory backend.
func ExampleClient_Call() {
	srv, err := startServer(exampleTools())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	c, err := client.New(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.Call(context.Background(), "render_report", ReportArgs{Title: "Q3", Pages: 3})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Text())
	fmt.Println("ran as a task:", res.TaskID != "")
	// Output:
	// "Q3": 3 pages rendered
	// ran as a task: true
}

// Start returns the task at once; its id can be kept to Resume it later.
// Cancel asks the server to stop it, and Wait tells how it ended.
func ExampleClient_Start() {
	srv, err := startServer(exampleTools())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	ctx := context.Background()
	c, err := client.New(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	task, err := c.Start(ctx, "wait", WaitArgs{Ms: 60_000})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(task.Status())

	again, err := c.Resume(ctx, task.ID()) // e.g. in another process
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := again.Cancel(ctx); err != nil {
		fmt.Println(err)
		return
	}
	_, err = again.Wait(ctx)
	fmt.Println(errors.Is(err, client.ErrCancelled))
	// Output:
	// working
	// true
}

// An input handler answers the server's input requests: here the
// elicitation a tool asks before it acts, while its task waits
// input_required.
func ExampleWithInputHandler() {
	srv, err := startServer(exampleTools())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	confirm := func(ctx context.Context, req client.InputRequest) (client.InputResponse, error) {
		if req.Method != client.MethodElicit {
			return client.InputResponse{}, fmt.Errorf("cannot answer %s", req.Method)
		}
		fmt.Println("asked:", req.Message())
		return client.Accept(map[string]any{"confirm": true}), nil
	}
	c, err := client.New(srv.URL, client.WithInputHandler(confirm))
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.Call(context.Background(), "confirm_action", ConfirmArgs{Action: "delete the old backups"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Text())
	// Output:
	// asked: Go ahead with delete the old backups?
	// Confirmed: delete the old backups
}
