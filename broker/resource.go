package broker

import (
	"crypto/sha256"
	"encoding/hex"
)

// TopicResource carries resource changes: a resource changed (notifications/resources/updated for
// the clients subscribed to it). The key is ResourceKey of its URI, the
// message the JSON object {"uri": <uri>}; every api replica hears it and
// forwards it to its subscribed streams.
const TopicResource Topic = "resource"

// ResourceKey is the bus key of a resource's URI: URIs hold characters no
// bus key may (SafeName), so the key is the first 128 bits of the URI's
// SHA-256, in hex.
func ResourceKey(uri string) string {
	sum := sha256.Sum256([]byte(uri))
	return hex.EncodeToString(sum[:16])
}
