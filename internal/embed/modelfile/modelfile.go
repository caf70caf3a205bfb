// Package modelfile is the envelope shared by the builtin embedders' model files
// (package wordvec's word vectors, package use's sentence encoder): a fixed 64-byte
// header with the format's magic, its version, 14 bytes of the format's own fields, the
// payload's length and its SHA-256, then the payload. A file cut short, padded, damaged
// or of another format is refused before any of its payload is read.
//
// Header layout (little-endian):
//
//	offset size  field
//	0      8     magic (each format's own; ending in CR LF catches text-mode mangling,
//	             as PNG's does)
//	8      2     version
//	10     14    the format's own fields (Fields)
//	24     8     payload length in bytes
//	32     32    SHA-256 of the payload
//	64     ...   payload
//
// It is a package of its own, beside the formats, so that the converters under
// internal/embed/cmd can write files without importing internal/embed, which embeds them.
package modelfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
)

// HeaderSize is the fixed size of the header that precedes the payload.
const HeaderSize = 64

// FieldsSize is the room in the header for a format's own fields (offsets 10 to 23).
const FieldsSize = 14

const (
	magicSize    = 8
	fieldsOffset = 10
)

// Fields are a format's own header fields; offsets are relative to header offset 10.
type Fields [FieldsSize]byte

// PutUint16 stores x at offset off of the fields.
func (f *Fields) PutUint16(off int, x uint16) { binary.LittleEndian.PutUint16(f[off:], x) }

// PutUint32 stores x at offset off of the fields.
func (f *Fields) PutUint32(off int, x uint32) { binary.LittleEndian.PutUint32(f[off:], x) }

// Uint16 reads the field at offset off.
func (f *Fields) Uint16(off int) uint16 { return binary.LittleEndian.Uint16(f[off:]) }

// Uint32 reads the field at offset off.
func (f *Fields) Uint32(off int) uint32 { return binary.LittleEndian.Uint32(f[off:]) }

// Write writes the header for payload, then payload.
func Write(w io.Writer, magic string, version uint16, fields Fields, payload []byte) error {
	if len(magic) != magicSize {
		return fmt.Errorf("modelfile: magic %q is not %d bytes", magic, magicSize)
	}
	h := make([]byte, 0, HeaderSize)
	h = append(h, magic...)
	h = binary.LittleEndian.AppendUint16(h, version)
	h = append(h, fields[:]...)
	h = binary.LittleEndian.AppendUint64(h, uint64(len(payload)))
	sum := sha256.Sum256(payload)
	h = append(h, sum[:]...)
	if _, err := w.Write(h); err != nil {
		return fmt.Errorf("modelfile: write: %w", err)
	}
	if _, err := w.Write(payload); err != nil {
		return fmt.Errorf("modelfile: write: %w", err)
	}
	return nil
}

// Open checks data's header (size, magic, version, payload length, checksum) and returns
// the format's fields and the payload, which aliases data. Its errors describe what is
// wrong; each format wraps them in its own ErrCorrupt.
func Open(data []byte, magic string, version uint16) (Fields, []byte, error) {
	var f Fields
	if len(data) < HeaderSize {
		return f, nil, fmt.Errorf("file is %d bytes, shorter than the %d-byte header", len(data), HeaderSize)
	}
	if string(data[:magicSize]) != magic {
		return f, nil, fmt.Errorf("bad magic %q", data[:magicSize])
	}
	if v := binary.LittleEndian.Uint16(data[magicSize:]); v != version {
		return f, nil, fmt.Errorf("unsupported version %d (this build reads %d)", v, version)
	}
	copy(f[:], data[fieldsOffset:fieldsOffset+FieldsSize])
	payload := data[HeaderSize:]
	if n := binary.LittleEndian.Uint64(data[24:]); n != uint64(len(payload)) {
		return f, nil, fmt.Errorf("payload is %d bytes, header says %d (truncated or padded)", len(payload), n)
	}
	if sum := sha256.Sum256(payload); !bytes.Equal(sum[:], data[32:HeaderSize]) {
		return f, nil, fmt.Errorf("checksum mismatch: payload sha256 %s, header says %s", hex.EncodeToString(sum[:8]), hex.EncodeToString(data[32:40]))
	}
	return f, payload, nil
}
