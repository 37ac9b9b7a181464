package consumer

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Artifact stores what r yields as a named blob of the task (a report, an
// export, an image) and returns a resource_link content block for it, to
// put in the result: the task's owner reads it with resources/read, at
// ArtifactURI, for as long as the task is kept; another principal gets the
// answer an unknown resource gets. Artifacts too large for a client's context
// are the point: the result stays small. name is 1 to 128 of letters,
// digits, ".", "_" and "-"; a second Artifact of one name replaces the
// first. The blob streams from r (the worker holds a chunk at a time).
func (c *callState) Artifact(ctx context.Context, name, mimeType string, r io.Reader) (Content, error) {
	if !taskstate.ValidArtifactName(name) {
		return Content{}, fmt.Errorf("consumer: artifact name %q: want 1 to 128 of letters, digits, '.', '_' and '-', not starting with '.'", name)
	}
	blobs, ok := c.w.store.(taskstate.Blobs)
	if !ok {
		return Content{}, fmt.Errorf("consumer: artifact %q: %T keeps no blobs", name, c.w.store)
	}
	n, err := blobs.PutBlob(ctx, taskstate.BlobKey(c.taskID, "artifact/"+name), r, c.artifactTTL())
	if err != nil {
		return Content{}, fmt.Errorf("consumer: artifact %q: %w", name, err)
	}
	if _, err := c.mutate(ctx, func(t *taskstate.Task) error {
		if t.Artifacts == nil {
			t.Artifacts = map[string]taskstate.Artifact{}
		}
		t.Artifacts[name] = taskstate.Artifact{MimeType: mimeType, Size: n}
		return nil
	}); err != nil {
		return Content{}, fmt.Errorf("consumer: artifact %q: %w", name, err)
	}
	return ResourceLink(taskstate.ArtifactURI(c.taskID, name), name, mimeType, n), nil
}

// artifactTTL outlasts the record: this run's remaining time at most
// (its timeout, and its input wait), then the record's own retention.
func (c *callState) artifactTTL() (ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rec == nil || c.rec.TTLMs <= 0 {
		return 0
	}
	return c.runBound + c.inputTimeout + c.rec.TTL() + blobSlack
}
