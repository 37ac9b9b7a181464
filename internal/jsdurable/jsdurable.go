// Package jsdurable holds what broker/natsbroker and taskstate/natskv share
// about the durability of the JetStream streams they create: refusing to
// reuse a stream whose storage type differs from the configured one, and
// explaining replica counts the server cannot provide.
package jsdurable

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StorageMismatchError says an existing stream keeps its messages elsewhere
// than the configuration asks. JetStream cannot change the storage type of a
// stream, and silently keeping the old one would leave a memory stream
// where file storage (and its durability) was asked for.
type StorageMismatchError struct {
	Stream     string // the stream (a KV bucket's is KV_<bucket>)
	Have, Want jetstream.StorageType
}

func (e *StorageMismatchError) Error() string {
	return fmt.Sprintf("JetStream stream %s exists with %s storage, but %s storage is configured; "+
		"JetStream cannot change the storage type of an existing stream: configure %s storage to keep using it, "+
		"or back the stream up and delete it (nats stream backup / nats stream rm %s) so that it is created again with %s storage",
		e.Stream, Name(e.Have), Name(e.Want), Name(e.Have), e.Stream, Name(e.Want))
}

// Name is "file" or "memory".
func Name(s jetstream.StorageType) string { return strings.ToLower(s.String()) }

// Storage maps the configuration's memory switch to a storage type.
func Storage(memory bool) jetstream.StorageType {
	if memory {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

// CheckStorage returns a *StorageMismatchError when stream exists with
// another storage type than want, and nil when it matches or does not exist
// yet.
func CheckStorage(ctx context.Context, js jetstream.JetStream, stream string, want jetstream.StorageType) error {
	st, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading stream %s: %w", stream, err)
	}
	if have := st.CachedInfo().Config.Storage; have != want {
		return &StorageMismatchError{Stream: stream, Have: have, Want: want}
	}
	return nil
}

// ExplainReplicas adds what to do to the errors a server gives for a replica
// count it cannot provide; other errors come back unchanged.
func ExplainReplicas(err error, replicas int) error {
	var apiErr *jetstream.APIError
	if replicas <= 1 || !errors.As(err, &apiErr) {
		return err
	}
	switch apiErr.ErrorCode {
	case 10074: // JSStreamReplicasNotSupportedErr
		return fmt.Errorf("%d replicas need a JetStream cluster, and this NATS server is not clustered (use 1 replica, or a cluster of at least %d servers): %w", replicas, replicas, err)
	case 10023, 10005: // JSInsufficientResourcesErr, JSClusterNoPeersErrF
		return fmt.Errorf("%d replicas need at least %d JetStream servers in the cluster with room for the stream: %w", replicas, replicas, err)
	}
	return err
}

// attemptTimeout bounds one try of a stream or bucket creation (see Retry).
const attemptTimeout = 4 * time.Second

// settlePause is the wait before another attempt after an answer a cluster
// still settling gives (see Retry).
const settlePause = 100 * time.Millisecond

// settleTries bounds those attempts (about 5 s): a stream still not found,
// or replicas still without peers, after them is the real state, and the
// caller is told so.
const settleTries = 50

// errNoPeers is JetStream's "no suitable peers for placement" (API error
// 10005), which nats.go has no constant for.
const errNoPeers jetstream.ErrorCode = 10005

// Retry runs f until it succeeds, fails for another reason than a transient
// one, or ctx ends; each attempt gets attemptTimeout. Clients that create the
// same clustered stream at the same moment (every process of a deployment
// starting together) do not all get an answer from the JetStream meta
// leader: some requests are never answered (seen with nats-server 2.15 and
// three replicas) and would wait out the caller's whole deadline; and a
// process whose create lost to another's may be told the stream is not found
// while the winner's stream is still being placed (API error 10059 right
// after "already in use"), or that replicas have no peers to go on while a
// cluster starting at the same time has not heard from all its servers yet
// (API error 10005, "peer offline"). By a later attempt the stream exists
// and f finds it (if f creates what it does not find), or the peers are
// there; a stream still missing, or peers still lacking, after settleTries
// attempts ends Retry with the error.
func Retry(ctx context.Context, f func(ctx context.Context) error) error {
	for settles := 0; ; {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := f(actx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		switch {
		case errors.Is(err, context.DeadlineExceeded):
		case errors.Is(err, jetstream.ErrStreamNotFound) || isAPIError(err, errNoPeers): // ErrStreamNotFound also matches an *APIError with code 10059
			if settles++; settles > settleTries {
				return err
			}
			t := time.NewTimer(settlePause)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return err
			}
		default:
			return err
		}
	}
}

func isAPIError(err error, code jetstream.ErrorCode) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == code
}
