// Package stopwords holds the English words a search leaves out of a query's literal
// matching: they are in most texts, so matching them finds everything. Knowledge recall
// drops them from its title channel; room memory does not run a query made only of them
// as a substring (the query "the" matched "other" and "there" as an exact match).
package stopwords

import "strings"

// list is built once, at package initialisation, and only read afterwards.
var list = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had has have having he her here
hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on once only
or other our ours ourselves out over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which while who whom why will with would
you your yours yourself yourselves`) {
		m[w] = true
	}
	return m
}()

// Is reports whether word is a stop word, in any case and with the punctuation that
// stands around words in a sentence trimmed.
func Is(word string) bool {
	return list[strings.ToLower(strings.Trim(word, `.,;:!?'"()`))]
}

// Only reports whether every word of q is a stop word (false for a q without words).
func Only(q string) bool {
	words := strings.Fields(q)
	for _, w := range words {
		if !Is(w) {
			return false
		}
	}
	return len(words) > 0
}
