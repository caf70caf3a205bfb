package pg

import "strings"

// likeEscaper escapes LIKE's wildcards and its escape character (the backslash, LIKE's
// default ESCAPE), so that a caller's % or _ matches only itself.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// LikeSubstring is the LIKE (or ILIKE) pattern of the strings that hold q anywhere, q's
// own wildcards taken literally.
func LikeSubstring(q string) string { return "%" + likeEscaper.Replace(q) + "%" }
