package web

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strings"
)

// The sign-in pages and the dashboard load and render their pages one way: each page is
// its own template set (the page's file with the surface's shared files, the layout
// among them, plus this package's head.html, which both layouts include so that the
// meta tags every page needs are written once), executed from "layout" into a buffer so
// that a template error answers 500 rather than half a page.

// ParsePages parses each named page, templates/<name>.html of files, with the shared
// files (paths in files) and this package's templates/head.html, under funcs.
func ParsePages(files fs.FS, funcs template.FuncMap, names []string, shared ...string) (map[string]*template.Template, error) {
	pages := make(map[string]*template.Template, len(names))
	for _, name := range names {
		t, err := template.New(name).Funcs(funcs).ParseFS(files, slices.Concat(shared, []string{"templates/" + name + ".html"})...)
		if err == nil {
			t, err = t.ParseFS(templateFiles, "templates/head.html")
		}
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// AssetHandler serves the files of the assets folder of files under prefix, and nothing
// else: a folder (the prefix itself included) is 404, not a listing of what it holds.
func AssetHandler(files fs.FS, prefix string) (http.Handler, error) {
	sub, err := fs.Sub(files, "assets")
	if err != nil {
		return nil, fmt.Errorf("assets: %w", err)
	}
	serve := http.StripPrefix(prefix, http.FileServer(http.FS(sub)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, prefix)
		if st, err := fs.Stat(sub, name); name == "" || err != nil || st.IsDir() {
			http.NotFound(w, r)
			return
		}
		serve.ServeHTTP(w, r)
	}), nil
}

// WritePage renders t's layout with data and, when that worked, writes it with status
// under the surface's security headers. On an error it answers 500 and returns the error
// for the caller to log.
func WritePage(w http.ResponseWriter, status int, t *template.Template, data any, headers func(http.Header)) error {
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", data); err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return err
	}
	headers(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes()) // the client may have gone; nothing to do about it
	return nil
}
