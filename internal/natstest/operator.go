package natstest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// Operator is a NATS operator (decentralised JWT auth) made for one test: a
// system account and an application account with JetStream, whose users
// authenticate with credentials files as nsc writes them.
type Operator struct {
	dir            string
	op, acc        nkeys.KeyPair
	jwt            string
	sysPub, sysJWT string
	accPub, accJWT string
}

// NewOperator makes the operator and its two accounts.
func NewOperator(t testing.TB) *Operator {
	t.Helper()
	o := &Operator{dir: t.TempDir(), op: newPair(t, nkeys.CreateOperator)}
	opPub := public(t, o.op)
	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = "mcpq-test"
	o.jwt = encode(t, oc, o.op)

	sys := newPair(t, nkeys.CreateAccount)
	o.sysPub = public(t, sys)
	sc := jwt.NewAccountClaims(o.sysPub)
	sc.Name = "SYS"
	o.sysJWT = encode(t, sc, o.op)

	o.acc = newPair(t, nkeys.CreateAccount)
	o.accPub = public(t, o.acc)
	ac := jwt.NewAccountClaims(o.accPub)
	ac.Name = "APP"
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	o.accJWT = encode(t, ac, o.op)
	return o
}

// Config is the part of a nats-server configuration file that puts the
// server in operator mode with this operator's accounts preloaded.
func (o *Operator) Config() string {
	return fmt.Sprintf("operator: %q\nsystem_account: %s\nresolver: MEMORY\nresolver_preload: {\n  %s: %q\n  %s: %q\n}\n",
		o.jwt, o.sysPub, o.sysPub, o.sysJWT, o.accPub, o.accJWT)
}

// Creds writes the credentials file of a new user of the application
// account and returns its path.
func (o *Operator) Creds(t testing.TB, name string) string {
	t.Helper()
	return userCreds(t, o.dir, name, o.acc)
}

// ForeignCreds writes a well-formed credentials file of a user whose account
// this operator never signed: a server of the operator refuses it.
func (o *Operator) ForeignCreds(t testing.TB, name string) string {
	t.Helper()
	return userCreds(t, o.dir, name, newPair(t, nkeys.CreateAccount))
}

func userCreds(t testing.TB, dir, name string, acc nkeys.KeyPair) string {
	t.Helper()
	u := newPair(t, nkeys.CreateUser)
	uc := jwt.NewUserClaims(public(t, u))
	uc.Name = name
	seed, err := u.Seed()
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(encode(t, uc, acc), seed)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".creds")
	if err := os.WriteFile(p, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// NKeyUser makes a user nkey and writes its seed to a file: it returns the
// public key (what the server's config names) and the file's path.
func NKeyUser(t testing.TB) (pub, seedFile string) {
	t.Helper()
	u := newPair(t, nkeys.CreateUser)
	seed, err := u.Seed()
	if err != nil {
		t.Fatal(err)
	}
	seedFile = filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return public(t, u), seedFile
}

func newPair(t testing.TB, create func() (nkeys.KeyPair, error)) nkeys.KeyPair {
	t.Helper()
	kp, err := create()
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

func public(t testing.TB, kp nkeys.KeyPair) string {
	t.Helper()
	p, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func encode(t testing.TB, c interface {
	Encode(nkeys.KeyPair) (string, error)
}, signer nkeys.KeyPair) string {
	t.Helper()
	s, err := c.Encode(signer)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
