// Package gosdk runs the tools and prompts of an existing go-sdk server
// (github.com/modelcontextprotocol/go-sdk, an *mcp.Server) on the queue: it
// registers them in a consumer.Mux and relays every job to the server over
// go-sdk's in-memory transport, with the mappings of package bridge. Inside
// a task the server's tool handlers work as they do behind any client:
// req.Session.Elicit, CreateMessage and ListRoots turn the task
// input_required until the client answers (tasks/update), NotifyProgress
// becomes the task's statusMessage, and the handler's ctx ends on
// tasks/cancel.
//
//	server := mcp.NewServer(&mcp.Implementation{Name: "files"}, nil)
//	mcp.AddTool(server, &mcp.Tool{Name: "delete"}, deleteFile)
//	worker.Main("files", func(ctx context.Context, mux *consumer.Mux) error {
//		_, err := gosdk.Serve(ctx, mux, server, nil) // the relay ends with ctx
//		return err
//	})
//
// This package is the only one of the module that imports go-sdk (the
// layout test holds it so): the queue's core does not depend on it.
package gosdk
