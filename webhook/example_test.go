package webhook_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/mcpqueue/mcpqueue/webhook"
)

// A receiver of completion webhooks checks each request's signature with
// the api's --webhook-secret and drops the retries of a delivery it has
// already handled, by its webhook-id.
func ExampleVerify() {
	key, err := webhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		panic(err)
	}
	seen := map[string]bool{}
	receiver := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id, err := webhook.Verify(key, r.Header, body, time.Now(), 0)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if !seen[id] {
			seen[id] = true
			fmt.Println("task ended:", string(body))
		}
		w.WriteHeader(http.StatusNoContent)
	}

	// What the api sends (twice here: a retry of the same delivery).
	body := []byte(`{"taskId":"t1","status":"completed"}`)
	for range 2 {
		req := httptest.NewRequest(http.MethodPost, "/hooks", strings.NewReader(string(body)))
		webhook.SetHeaders(req.Header, key, webhook.DeliveryID("t1"), time.Now(), body)
		rec := httptest.NewRecorder()
		receiver(rec, req)
		fmt.Println(rec.Code)
	}
	// Output:
	// task ended: {"taskId":"t1","status":"completed"}
	// 204
	// 204
}
