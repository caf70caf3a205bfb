package embed

import (
	"slices"
	"strings"
	"testing"
)

// words runs the tokenizer against a fixed vocabulary and returns the words it found.
func words(vocab, text string) []string {
	list := strings.Fields(vocab)
	lookup := func(w string) (int32, bool) {
		i := slices.Index(list, w)
		return int32(i), i >= 0
	}
	var got []string
	forEachWord(text, lookup, func(i int32) { got = append(got, list[i]) })
	return got
}

func TestTokenize(t *testing.T) {
	vocab := "do not can will is it are they have am would rotate my api keys e-mail mail " +
		"read memory http server neill users cafe naive state art of the user 2024 v2 e"
	cases := []struct{ text, want string }{
		{"Rotate my API keys!", "rotate my api keys"},
		{"don't can't won't isn't", "do not can not will not is not"},
		{"It's they're I'm we'd they've", "it they are am would they have"}, // "I", "we" unknown; 's dropped
		{"Don\u2019t \u2018quote\u2019", "do not"},                          // curly apostrophes, quotes trimmed
		{"the users' keys", "the users keys"},                               // trailing possessive apostrophe
		{"e-mail", "e-mail"},                                                // known compound kept whole
		{"read-memory", "read memory"},                                      // unknown compound split
		{"state-of-the-art", "state of the art"},
		{"O'Neill", "neill"}, // "oneill" unknown: split, "o" unknown
		{"readMemory HTTPServer", "read memory http server"},
		{"Café naïve", "cafe naive"},
		{"v2 2024", "v2 2024"},
		{"read_memory, user.e-mail", "read memory user e-mail"},
		{"--- '' -", ""},
		{"", ""},
	}
	for _, c := range cases {
		got := strings.Join(words(vocab, c.text), " ")
		if got != c.want {
			t.Errorf("%q: got %q, want %q", c.text, got, c.want)
		}
	}
}

func TestSplitCamel(t *testing.T) {
	for in, want := range map[string]string{
		"readMemory": "read Memory", "HTTPServer": "HTTP Server", "lower": "lower", "ABC": "ABC", "getHTTPClient": "get HTTP Client",
	} {
		if got := strings.Join(splitCamel(in), " "); got != want {
			t.Errorf("splitCamel(%q) = %q, want %q", in, got, want)
		}
	}
}
