// Package memstate is an in-memory taskstate.Store and taskstate.Catalog
// for one process: records, sessions, catalog entries and blobs live in
// maps of this process and are gone when it ends. It passes the contract
// suite in statetest like the real stores, TTLs and watches included, so
// code written against the seam behaves the same on it; it exists for unit
// tests (users' handler tests through consumer/consumertest, and this
// module's fast tests), never for a deployment and never instead of natskv
// or redisstate in integration tests.
//
// What it has of the seam's optional abilities: taskstate.Sessions,
// taskstate.Blobs and taskstate.Feed. Expired entries are dropped when
// they are next read or listed; nothing runs in the background.
package memstate
