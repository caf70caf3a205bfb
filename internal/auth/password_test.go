package auth

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func TestPasswords(t *testing.T) {
	t.Parallel()
	h, err := HashPassword("correct horse")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("argon2id hashes verify their password only", func(t *testing.T) {
		if !strings.HasPrefix(h, "$argon2id$v=19$") {
			t.Fatalf("hash %q is not an argon2id PHC string", h)
		}
		if err := VerifyPassword(h, "correct horse"); err != nil {
			t.Fatal(err)
		}
		if err := VerifyPassword(h, "correct horsf"); !errors.Is(err, ErrPasswordMismatch) {
			t.Fatalf("wrong password: %v", err)
		}
	})
	t.Run("bcrypt hashes written before still verify", func(t *testing.T) {
		b, err := bcrypt.GenerateFromPassword([]byte("old password"), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		if err := VerifyPassword(string(b), "old password"); err != nil {
			t.Fatal(err)
		}
		if err := VerifyPassword(string(b), "other"); !errors.Is(err, ErrPasswordMismatch) {
			t.Fatalf("wrong password: %v", err)
		}
	})
	t.Run("oversized passwords and unknown formats are refused", func(t *testing.T) {
		if err := VerifyPassword(h, strings.Repeat("x", MaxPasswordBytes+1)); !errors.Is(err, ErrPasswordMismatch) {
			t.Fatalf("oversized: %v", err)
		}
		if err := VerifyPassword("$scrypt$whatever", "x"); err == nil || errors.Is(err, ErrPasswordMismatch) {
			t.Fatalf("unknown format: %v", err)
		}
	})
}
