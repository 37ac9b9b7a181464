package natsbroker

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpqueue/mcpqueue/broker"
)

// The job's wire form. A job that carries its task's record
// (broker.Job.Record, every job of a new task) is sent compact: the byte
// compactJob, then TaskID, Dedupe, Kind, Tool, Owner and ArgumentsRef, each
// a uvarint length and its bytes, the record's revision as a uvarint, and
// the record itself to the end, in place of the arguments and meta it
// holds. Nothing is encoded as JSON again, and the worker decodes the
// record once, with the store's own codec (taskstate.Decode), where it
// used to decode the job's JSON and then read and decode the record.
// Every other job (a requeue, a resume) is broker.EncodeJob's JSON, which
// starts with '{'. A worker of a version before the compact form cannot
// read one and drops it; the reaper republishes such a task after
// --publish-grace, as JSON.

// compactJob starts a compact job; JSON starts with '{'.
const compactJob = 0x01

// encodeJob is j's wire form: compact when it carries its record.
func encodeJob(j *broker.Job) ([]byte, error) {
	if j.Record == nil {
		return broker.EncodeJob(j)
	}
	if j.TaskID == "" || j.Tool == "" {
		return broker.EncodeJob(j) // its error
	}
	fields := [...]string{j.TaskID, j.Dedupe, j.Kind, j.Tool, j.Owner, j.ArgumentsRef}
	n := 1 + binary.MaxVarintLen64 + len(j.Record)
	for _, f := range fields {
		n += binary.MaxVarintLen64 + len(f)
	}
	b := make([]byte, 0, n)
	b = append(b, compactJob)
	for _, f := range fields {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	b = binary.AppendUvarint(b, j.Revision)
	return append(b, j.Record...), nil
}

var errShortJob = errors.New("natsbroker: undecodable job: truncated compact job")

// decodeJob reads either wire form into j.
func decodeJob(b []byte, j *broker.Job) error {
	if len(b) == 0 || b[0] != compactJob {
		if err := json.Unmarshal(b, j); err != nil {
			return fmt.Errorf("natsbroker: undecodable job: %w", err)
		}
		return nil
	}
	b = b[1:]
	for _, f := range [...]*string{&j.TaskID, &j.Dedupe, &j.Kind, &j.Tool, &j.Owner, &j.ArgumentsRef} {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return errShortJob
		}
		*f = string(b[k : k+int(n)])
		b = b[k+int(n):]
	}
	rev, k := binary.Uvarint(b)
	if k <= 0 || k == len(b) {
		return errShortJob
	}
	j.Revision = rev
	j.Record = json.RawMessage(b[k:])
	return nil
}

// DecodeJob reads a message of the job stream in either wire form, for
// tools (and tests) that read the stream themselves.
func DecodeJob(b []byte) (*broker.Job, error) {
	var j broker.Job
	if err := decodeJob(b, &j); err != nil {
		return nil, err
	}
	return &j, nil
}
