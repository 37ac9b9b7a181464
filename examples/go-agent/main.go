// Command go-agent calls one tool and prints its result; Ctrl-C cancels it:
//
//	go run ./examples/go-agent http://127.0.0.1:8080/mcp render_report '{"title":"Q3","pages":3}'
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/mcpqueue/mcpqueue/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	c, err := client.New(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Call(ctx, os.Args[2], json.RawMessage(os.Args[3]))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Text())
}
