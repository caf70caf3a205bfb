package web_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/fstest"

	"github.com/relayroom/relayroom/internal/web"
)

// TestAssetsServeFilesOnly: the asset routes serve their files and list no folder. The
// standard file server answered /assets/ (and any folder in it) with a listing of what
// the folder holds.
func TestAssetsServeFilesOnly(t *testing.T) {
	t.Parallel()
	files := fstest.MapFS{"assets/site.css": {Data: []byte("body{}")}, "assets/img/logo.svg": {Data: []byte("<svg/>")}}
	h, err := web.AssetHandler(files, "/assets/")
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{
		"/assets/site.css":     http.StatusOK,
		"/assets/img/logo.svg": http.StatusOK,
		"/assets/":             http.StatusNotFound,
		"/assets/img/":         http.StatusNotFound,
		"/assets/img":          http.StatusNotFound,
		"/assets/missing.css":  http.StatusNotFound,
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want {
			t.Errorf("GET %s: %d, want %d: %.80s", path, rec.Code, want, rec.Body.String())
		}
	}
}
