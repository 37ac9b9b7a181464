package gosdk

import (
	"context"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpqueue/mcpqueue/bridge"
	"github.com/mcpqueue/mcpqueue/consumer"
)

// Serve registers server's tools and prompts in mux and relays their calls
// to it (bridge.Serve). opts.Name defaults to the server's Implementation
// name, opts.Sessions (concurrent calls) to 1. Close the Relay once the
// Worker running mux has returned.
func Serve(ctx context.Context, mux *consumer.Mux, server *mcp.Server, opts *bridge.Options) (*bridge.Relay, error) {
	return bridge.Serve(ctx, mux, Dialer(server), opts)
}

// Dialer connects a new session to server over an in-memory transport.
func Dialer(server *mcp.Server) bridge.Dialer {
	return func(ctx context.Context) (bridge.Conn, error) {
		serverSide, clientSide := mcp.NewInMemoryTransports()
		ss, err := server.Connect(context.Background(), serverSide, nil)
		if err != nil {
			return nil, fmt.Errorf("gosdk: connect: %w", err)
		}
		conn, err := clientSide.Connect(ctx)
		if err != nil {
			_ = ss.Close()
			return nil, fmt.Errorf("gosdk: connect: %w", err)
		}
		return &memConn{conn: conn, ss: ss}, nil
	}
}

// memConn is the client end of an in-memory session, as a bridge.Conn.
type memConn struct {
	conn mcp.Connection
	ss   *mcp.ServerSession
	once sync.Once
}

func (c *memConn) Read() ([]byte, error) {
	msg, err := c.conn.Read(context.Background())
	if err != nil {
		return nil, err
	}
	return jsonrpc.EncodeMessage(msg)
}

func (c *memConn) Write(b []byte) error {
	msg, err := jsonrpc.DecodeMessage(b)
	if err != nil {
		return fmt.Errorf("gosdk: %w", err)
	}
	return c.conn.Write(context.Background(), msg)
}

func (c *memConn) Close() error {
	var err error
	c.once.Do(func() {
		err = c.conn.Close()
		_ = c.ss.Close()
	})
	return err
}
