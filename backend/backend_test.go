package backend_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/mcpqueue/mcpqueue/backend"
)

// Close runs what OnClose registered, last first, joins the errors, and
// runs nothing twice.
func TestCloseOrder(t *testing.T) {
	var b backend.Backend
	var order []string
	boom := errors.New("boom")
	b.OnClose(func() error { order = append(order, "conn"); return nil })
	b.OnClose(func() error { order = append(order, "store"); return boom })
	if err := b.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close = %v; want the store's error", err)
	}
	if want := []string{"store", "conn"}; !slices.Equal(order, want) {
		t.Fatalf("closed %v; want %v", order, want)
	}
	if err := b.Close(); err != nil || len(order) != 2 {
		t.Fatalf("second Close = %v, closed %v: want nothing run again", err, order)
	}
	var none *backend.Backend
	if err := none.Close(); err != nil {
		t.Fatalf("nil Close = %v", err)
	}
}
