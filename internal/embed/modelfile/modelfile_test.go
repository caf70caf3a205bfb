package modelfile

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

const testMagic = "RRTEST\r\n"

func sealed(t *testing.T) []byte {
	t.Helper()
	var f Fields
	f.PutUint16(0, 7)
	f.PutUint32(2, 1<<20)
	var b bytes.Buffer
	if err := Write(&b, testMagic, 3, f, []byte("payload bytes")); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	data := sealed(t)
	if len(data) != HeaderSize+len("payload bytes") {
		t.Fatalf("file is %d bytes", len(data))
	}
	f, payload, err := Open(data, testMagic, 3)
	if err != nil {
		t.Fatal(err)
	}
	if string(payload) != "payload bytes" || f.Uint16(0) != 7 || f.Uint32(2) != 1<<20 {
		t.Errorf("payload %q, fields %d %d", payload, f.Uint16(0), f.Uint32(2))
	}
}

func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		damage func([]byte) []byte
		want   string
	}{
		{"short file", func(b []byte) []byte { return b[:HeaderSize-1] }, "shorter than the 64-byte header"},
		{"truncated payload", func(b []byte) []byte { return b[:len(b)-1] }, "truncated or padded"},
		{"padded payload", func(b []byte) []byte { return append(b, 0) }, "truncated or padded"},
		{"flipped payload byte", func(b []byte) []byte { b[HeaderSize] ^= 1; return b }, "checksum mismatch"},
		{"other magic", func(b []byte) []byte { b[0] = 'X'; return b }, "bad magic"},
		{"other version", func(b []byte) []byte { binary.LittleEndian.PutUint16(b[8:], 4); return b }, "unsupported version 4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if _, _, err := Open(c.damage(sealed(t)), testMagic, 3); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Open: %v; want an error saying %q", err, c.want)
			}
		})
	}
}

func TestWriteRefusesMagicOfOtherSize(t *testing.T) {
	t.Parallel()
	if err := Write(&bytes.Buffer{}, "RR\r\n", 1, Fields{}, nil); err == nil {
		t.Error("a 4-byte magic was accepted")
	}
}
