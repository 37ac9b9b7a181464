// Package redisstate implements taskstate.Store, taskstate.Catalog and
// taskstate.Sessions on Redis.
//
// A task record is a hash {v: JSON record, r: revision} under
// <Prefix>task:<id>. Every write is a Lua script, so compare-and-set on the
// revision, the retention TTL and the change notification happen atomically:
// the script checks the stored revision, bumps it, writes the record, sets a
// TTL only when the record is terminal (PERSIST otherwise, so active records
// never expire) and PUBLISHes "<revision> <JSON>" on <Prefix>watch:<id>. No
// server configuration (keyspace notifications) is needed.
//
// Active records are listed in the set <Prefix>active (active.go), which the
// create, update and delete scripts keep in the same step as the record, so
// the reaper's active Scan reads the few active records instead of walking
// every retained one.
//
// Tasks with an owner are also listed in their owner's index (index.go): the
// create script adds the task there in the same step that stores the record,
// and the update script schedules the entry's removal for when a terminal
// record's retention ends. Those scripts touch the record and the owner's
// index, which hash to different slots, and List reads records from inside its
// script; so the store needs one Redis primary (standalone or Sentinel), not
// Redis Cluster.
//
// Watch subscribes to the record's channel through one pub/sub connection per
// Store shared by all watchers, and only then reads the current record, so no
// version written in between is missed; versions are ordered by revision.
//
// The catalog is a hash of tool name → JSON, a sorted set of expiry times
// (Redis server time, so worker clocks do not matter) and a version counter
// bumped whenever the set of tools or a definition changes; each bump is
// PUBLISHed on <Prefix>catalog. Reads purge expired entries and fetch the
// hash only when the version differs from the one the Store has cached. The
// Store subscribes to <Prefix>catalog on its first catalog read and then
// answers from its cache, with no round trip, until a message arrives, the
// pub/sub connection breaks, or the first cached tool's expiry passes
// (tool.go).
//
// A session is a JSON string under <Prefix>session:<id>, written with an
// expiry of Config.SessionTTL.
package redisstate
