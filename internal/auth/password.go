package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"
)

// Argon2id parameters of new password hashes: OWASP's recommended minimum (19 MiB, 2
// passes, 1 lane). RFC 9106's 64 MiB option took seconds per sign-in on a loaded 2-core
// machine and made every sign-in a memory lever; stored hashes carry their parameters,
// so raising these later needs no migration.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024 // KiB
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

// MaxPasswordBytes bounds what is hashed: argon2 would take a megabyte, and a sign-in form
// must not become a CPU lever.
const MaxPasswordBytes = 1024

// ErrPasswordMismatch is a password that does not match its hash.
var ErrPasswordMismatch = errors.New("password does not match")

// HashPassword returns the PHC string of an argon2id hash ($argon2id$v=19$m=…,t=…,p=…$salt$hash).
func HashPassword(password string) (string, error) {
	if len(password) > MaxPasswordBytes {
		return "", fmt.Errorf("password longer than %d bytes", MaxPasswordBytes)
	}
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("password salt: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		enc.EncodeToString(salt), enc.EncodeToString(key)), nil
}

// VerifyPassword checks a password against a stored hash: argon2id (what is written now)
// or bcrypt (what `admin apply` wrote before), so existing people keep signing in.
func VerifyPassword(stored, password string) error {
	if len(password) > MaxPasswordBytes {
		return ErrPasswordMismatch
	}
	if strings.HasPrefix(stored, "$2") {
		if err := bcrypt.CompareHashAndPassword([]byte(stored), []byte(password)); err != nil {
			return ErrPasswordMismatch
		}
		return nil
	}
	var version, memory, iterations int
	var threads uint8
	parts := strings.Split(stored, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return fmt.Errorf("password hash: unknown format")
	}
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return fmt.Errorf("password hash: unsupported version %q", parts[2])
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &memory, &iterations, &threads); err != nil || memory <= 0 || memory > 1<<20 || iterations <= 0 || iterations > 100 || threads == 0 {
		return fmt.Errorf("password hash: bad parameters %q", parts[3])
	}
	enc := base64.RawStdEncoding
	salt, err := enc.DecodeString(parts[4])
	if err != nil {
		return fmt.Errorf("password hash: salt: %w", err)
	}
	want, err := enc.DecodeString(parts[5])
	if err != nil || len(want) == 0 {
		return fmt.Errorf("password hash: key: %v", err)
	}
	got := argon2.IDKey([]byte(password), salt, uint32(iterations), uint32(memory), threads, uint32(len(want)))
	if subtle.ConstantTimeCompare(got, want) != 1 {
		return ErrPasswordMismatch
	}
	return nil
}
