package testfix

import (
	"fmt"
	"regexp"
	"strings"
)

// recallVars are the variables rr_recall's query reads (migrations 000036 and 000044), in
// the order RecallQuery numbers them, with their types: the project, the function's
// arguments, and each channel's cap.
var recallVars = [][2]string{{"proj", "uuid"}, {"q", "text"}, {"title_q", "text"}, {"want_kind", "text"},
	{"at", "timestamptz"}, {"candidates", "integer"}}

// RecallQuery is the query of rr_recall's source src (pg_proc.prosrc), runnable on its own
// for EXPLAIN: the static text from RETURN QUERY to its semicolon, each variable a typed
// parameter ($1 the project, $2–$5 the arguments, $6 the channels' cap).
func RecallQuery(src string) (string, error) {
	start, end := strings.Index(src, "RETURN QUERY"), strings.LastIndex(src, ";\nEND")
	if start < 0 || end <= start {
		return "", fmt.Errorf("rr_recall no longer runs one static query:\n%s", src)
	}
	q := src[start+len("RETURN QUERY") : end]
	for i, v := range recallVars {
		q = regexp.MustCompile(`\b`+v[0]+`\b`).ReplaceAllString(q, fmt.Sprintf("$$%d::%s", i+1, v[1]))
	}
	return q, nil
}
