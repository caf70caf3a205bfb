// Package auth verifies who is calling: agent keys, connect codes, and (later) OAuth
// tokens, and the RFC 9728 metadata that tells an MCP client where to sign in.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"hash/crc32"
	"math/big"
	"strings"
)

// Credential prefixes. They make our secrets recognisable to secret scanners (ours
// included) and to people.
const (
	AgentKeyPrefix    = "sk-qyt-"
	ConnectCodePrefix = "qyt_cc_"
)

const (
	alphabet  = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	idLen     = 8  // public, looked up: ~47 bits
	secretLen = 32 // never stored: ~190 bits
	sumLen    = 6  // crc32 of the rest, base62
	bodyLen   = idLen + secretLen + sumLen
)

// ErrMalformed means the string cannot be one of our credentials: wrong prefix, length,
// alphabet or checksum. It is decided without touching the database.
var ErrMalformed = errors.New("malformed credential")

// Parsed is a credential whose shape and checksum are valid.
type Parsed struct {
	Prefix string
	ID     string // the public part used to find the stored hash
	raw    string
}

// Hash is what is stored: the SHA-256 of the whole credential. Credentials carry 190 bits
// of randomness, so a fast hash is as strong as a slow one here and costs microseconds.
func (p Parsed) Hash() []byte {
	h := sha256.Sum256([]byte(p.raw))
	return h[:]
}

// Matches compares in constant time against a stored hash.
func (p Parsed) Matches(stored []byte) bool {
	return subtle.ConstantTimeCompare(p.Hash(), stored) == 1
}

// Generate makes a new credential with the given prefix.
func Generate(prefix string) (string, Parsed, error) {
	body, err := randomString(idLen + secretLen)
	if err != nil {
		return "", Parsed{}, err
	}
	raw := prefix + body + checksum(prefix+body)
	return raw, Parsed{Prefix: prefix, ID: body[:idLen], raw: raw}, nil
}

// Parse checks a credential of the given prefix.
func Parse(prefix, s string) (Parsed, error) {
	if !strings.HasPrefix(s, prefix) || len(s) != len(prefix)+bodyLen {
		return Parsed{}, ErrMalformed
	}
	body := s[len(prefix):]
	for i := 0; i < len(body); i++ {
		if strings.IndexByte(alphabet, body[i]) < 0 {
			return Parsed{}, ErrMalformed
		}
	}
	if subtle.ConstantTimeCompare([]byte(checksum(prefix+body[:idLen+secretLen])), []byte(body[idLen+secretLen:])) != 1 {
		return Parsed{}, ErrMalformed
	}
	return Parsed{Prefix: prefix, ID: body[:idLen], raw: s}, nil
}

func checksum(s string) string {
	n := new(big.Int).SetUint64(uint64(crc32.ChecksumIEEE([]byte(s))))
	out := make([]byte, sumLen)
	base := big.NewInt(int64(len(alphabet)))
	mod := new(big.Int)
	for i := sumLen - 1; i >= 0; i-- {
		n.DivMod(n, base, mod)
		out[i] = alphabet[mod.Int64()]
	}
	return string(out)
}

func randomString(n int) (string, error) {
	out := make([]byte, n)
	max := big.NewInt(int64(len(alphabet)))
	for i := range out {
		v, err := rand.Int(rand.Reader, max)
		if err != nil {
			return "", err
		}
		out[i] = alphabet[v.Int64()]
	}
	return string(out), nil
}

// Mask shows a credential's prefix and public id only, for output where a person needs to
// tell keys apart (never in logs).
func Mask(p Parsed) string { return p.Prefix + p.ID + "…" }
