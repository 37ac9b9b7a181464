package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/testenv"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

func (e *env) createKind(t *testing.T, kind, name string, args any) string {
	t.Helper()
	b, _ := json.Marshal(args)
	tk, err := e.prod.Create(context.Background(), &producer.Request{Kind: kind, Tool: name, Arguments: b, Era: taskstate.Era20260728, Mode: taskstate.ModeSync})
	if err != nil {
		t.Fatal(err)
	}
	return tk.ID
}

func resourceMux() *consumer.Mux {
	mux := consumer.NewMux()
	consumer.HandleResource(mux, consumer.ResourceDef{URI: "test://greeting", Name: "greeting", MimeType: "text/plain", Cache: consumer.Cache{TTL: time.Minute, Public: true}},
		func(ctx context.Context, c *consumer.Call[consumer.ResourceRequest]) ([]consumer.ResourceContents, error) {
			return []consumer.ResourceContents{consumer.TextContents("", "text/plain", "hello")}, nil
		})
	consumer.HandleResourceTemplate(mux, consumer.ResourceTemplate{
		URITemplate: "test://items/{id}",
		Complete: func(ctx context.Context, c *consumer.Call[consumer.CompleteRequest]) (*consumer.Completion, error) {
			var out []string
			for _, id := range []string{"apple", "apricot", "banana"} {
				if strings.HasPrefix(id, c.Args.Value) {
					out = append(out, id)
				}
			}
			return &consumer.Completion{Values: out}, nil
		},
	}, func(ctx context.Context, c *consumer.Call[consumer.ResourceRequest]) ([]consumer.ResourceContents, error) {
		if c.Args.Vars["id"] == "missing" {
			return nil, consumer.ErrResourceNotFound
		}
		if c.Args.Vars["id"] == "empty" {
			return nil, nil
		}
		return []consumer.ResourceContents{consumer.BlobContents("", "application/octet-stream", []byte(c.Args.Vars["id"]))}, nil
	})
	return mux
}

func TestResourcesRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mux := resourceMux()
	var kinds []string
	for _, info := range mux.Tools() {
		kinds = append(kinds, info.Key())
	}
	if want := "completion/template/test://items/{id} resource/test://greeting template/test://items/{id}"; strings.Join(kinds, " ") != want {
		t.Fatalf("catalog keys %q, want %q", kinds, want)
	}
	e.run(t, mux, nil)

	tk := e.waitFor(t, e.createKind(t, taskstate.KindResource, "test://greeting", map[string]string{"uri": "test://greeting"}), terminal)
	if tk.Status != taskstate.Completed || string(tk.Result) != `{"contents":[{"uri":"test://greeting","mimeType":"text/plain","text":"hello"}],"ttlMs":60000,"cacheScope":"public"}` {
		t.Fatalf("read test://greeting: %s %s %+v", tk.Status, tk.Result, tk.Error)
	}
	tk = e.waitFor(t, e.createKind(t, taskstate.KindTemplate, "test://items/{id}", map[string]string{"uri": "test://items/a%2Fb"}), terminal)
	if tk.Status != taskstate.Completed || string(tk.Result) != `{"contents":[{"uri":"test://items/a%2Fb","mimeType":"application/octet-stream","blob":"YS9i"}],"ttlMs":0,"cacheScope":"private"}` {
		t.Fatalf("read test://items/a%%2Fb: %s %s %+v", tk.Status, tk.Result, tk.Error)
	}
	for _, uri := range []string{"test://items/missing", "test://items/empty", "test://items/x/y"} {
		tk = e.waitFor(t, e.createKind(t, taskstate.KindTemplate, "test://items/{id}", map[string]string{"uri": uri}), terminal)
		if tk.Status != taskstate.Failed || tk.Error.Code != -32602 || string(tk.Error.Data) != `{"uri":"`+uri+`"}` {
			t.Fatalf("read %s: want -32602 with the uri as data, got %s %+v", uri, tk.Status, tk.Error)
		}
	}

	tk = e.waitFor(t, e.createKind(t, taskstate.KindCompletion, "template/test://items/{id}", consumer.CompleteRequest{Argument: "id", Value: "ap"}), terminal)
	if tk.Status != taskstate.Completed || string(tk.Result) != `{"completion":{"values":["apple","apricot"]}}` {
		t.Fatalf("complete: %s %s %+v", tk.Status, tk.Result, tk.Error)
	}
	tk = e.waitFor(t, e.createKind(t, taskstate.KindCompletion, "template/test://items/{id}", consumer.CompleteRequest{Argument: "nope", Value: "ap"}), terminal)
	if tk.Status != taskstate.Failed || tk.Error.Code != -32602 || !strings.Contains(tk.Error.Message, `no argument "nope"`) {
		t.Fatalf("complete of an unknown argument: %s %+v", tk.Status, tk.Error)
	}
}

func TestResourceUpdatedReachesTheBus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mux := resourceMux()
	ctx := context.Background()
	if err := mux.ResourceUpdated(ctx, "test://greeting"); !errors.Is(err, consumer.ErrNotRunning) {
		t.Fatalf("before the worker runs: %v, want ErrNotRunning", err)
	}
	got := make(chan string, 4)
	sub, err := e.bus.Subscribe(ctx, broker.TopicResource, "", func(key string, data []byte) {
		got <- key + " " + string(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	only, err := mux.Only("resource/test://greeting")
	if err != nil {
		t.Fatal(err)
	}
	e.run(t, only, nil)
	// The worker runs the narrowed copy; the Mux the author kept works too.
	testenv.Eventually(t, 10*time.Second, "the worker to run the mux", func() bool {
		return !errors.Is(mux.ResourceUpdated(ctx, "test://greeting"), consumer.ErrNotRunning)
	})
	select {
	case m := <-got:
		if want := broker.ResourceKey("test://greeting") + ` {"uri":"test://greeting"}`; m != want {
			t.Fatalf("bus message %q, want %q", m, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no resource update on the bus")
	}
	if err := mux.ResourceUpdated(ctx, "no scheme"); err == nil {
		t.Fatal("an invalid URI was published")
	}
}

func TestResourceRegistrationMistakesPanic(t *testing.T) {
	read := func(ctx context.Context, c *consumer.Call[consumer.ResourceRequest]) ([]consumer.ResourceContents, error) {
		return nil, nil
	}
	for name, f := range map[string]func(m *consumer.Mux){
		"no scheme": func(m *consumer.Mux) { consumer.HandleResource(m, consumer.ResourceDef{URI: "greeting"}, read) },
		"twice":     func(m *consumer.Mux) { consumer.HandleResource(m, consumer.ResourceDef{URI: "test://a"}, read) },
		"bad template": func(m *consumer.Mux) {
			consumer.HandleResourceTemplate(m, consumer.ResourceTemplate{URITemplate: "test://{?q}"}, read)
		},
		"no handler": func(m *consumer.Mux) { consumer.HandleResource(m, consumer.ResourceDef{URI: "test://b"}, nil) },
	} {
		m := consumer.NewMux()
		consumer.HandleResource(m, consumer.ResourceDef{URI: "test://a"}, read)
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f(m)
		}()
	}
}
