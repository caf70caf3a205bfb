package npmpack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
)

// tarball writes a package tarball as npm packs it (members under package/) and
// returns its path and bytes.
func tarball(t *testing.T, name string, members map[string]string) (string, []byte) {
	t.Helper()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	tw := tar.NewWriter(zw)
	add := func(path, body string) {
		if err := tw.WriteHeader(&tar.Header{Name: "package/" + path, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	add("package.json", `{"name":"`+name+`","version":"1.2.3","license":"MIT"}`)
	for p, body := range members {
		add(p, body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "pkg.tgz")
	if err := os.WriteFile(path, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, gz.Bytes()
}

func source(t *testing.T, tgz, sha string) *Source {
	t.Helper()
	var s Source
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	s.Flags(fs, "demo-pkg", "1.2.3", sha)
	if err := fs.Parse([]string{"-tgz", tgz}); err != nil {
		t.Fatal(err)
	}
	return &s
}

func TestReadHashesAndHandsOverMembers(t *testing.T) {
	t.Parallel()
	path, raw := tarball(t, "demo-pkg", map[string]string{"dist/model.json": "{}", "LICENSE": "MIT text"})
	s256, s1 := sha256.Sum256(raw), sha1.Sum(raw)
	got := map[string]string{}
	pkg, err := source(t, path, hex.EncodeToString(s256[:])).Read(func(name string, r io.Reader) error {
		b, err := io.ReadAll(r)
		got[name] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if pkg.Name != "demo-pkg" || pkg.Version != "1.2.3" || pkg.License != "MIT" || pkg.Size != int64(len(raw)) {
		t.Errorf("package %+v", pkg)
	}
	if pkg.SHA256 != hex.EncodeToString(s256[:]) || pkg.SHA1 != hex.EncodeToString(s1[:]) || !strings.HasPrefix(pkg.Integrity, "sha512-") {
		t.Errorf("hashes %s %s %s", pkg.SHA256, pkg.SHA1, pkg.Integrity)
	}
	if len(got) != 2 || got["dist/model.json"] != "{}" || got["LICENSE"] != "MIT text" {
		t.Errorf("members %v", got)
	}
}

func TestReadRefuses(t *testing.T) {
	t.Parallel()
	skip := func(string, io.Reader) error { return nil }
	t.Run("another package", func(t *testing.T) {
		t.Parallel()
		path, _ := tarball(t, "other-pkg", nil)
		if _, err := source(t, path, "").Read(skip); err == nil || !strings.Contains(err.Error(), `is package "other-pkg"`) {
			t.Errorf("Read: %v", err)
		}
	})
	t.Run("a tarball of another sha256", func(t *testing.T) {
		t.Parallel()
		path, _ := tarball(t, "demo-pkg", nil)
		if _, err := source(t, path, strings.Repeat("0", 64)).Read(skip); err == nil || !strings.Contains(err.Error(), "a different package version?") {
			t.Errorf("Read: %v", err)
		}
	})
	t.Run("neither -npm nor -tgz", func(t *testing.T) {
		t.Parallel()
		if _, err := source(t, "", "").Read(skip); err == nil || !strings.Contains(err.Error(), "need -npm SPEC or -tgz FILE") {
			t.Errorf("Read: %v", err)
		}
	})
}

func TestWriteProvenance(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "PROVENANCE.md")
	tmpl := template.Must(template.New("p").Parse("# {{.Name}}@{{.Version}}\n"))
	if err := WriteProvenance(path, tmpl, Package{Name: "demo-pkg", Version: "1.2.3"}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "# demo-pkg@1.2.3\n" {
		t.Errorf("wrote %q (%v)", b, err)
	}
}
