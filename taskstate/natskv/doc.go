// Package natskv implements taskstate.Store and taskstate.Catalog on NATS
// JetStream key-value buckets. Records are written with compare-and-set on the
// key's last sequence; a record turning terminal is written with a per-message
// TTL, so retention counts from that moment and active records never expire.
package natskv
