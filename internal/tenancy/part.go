package tenancy

import (
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/text"
)

// CheckPart refuses a ?part= value that is not storable text (a NUL, invalid UTF-8 or an
// overlong encoding such as %E0%80%80) with Invalid, which every endpoint answers as
// HTTP 400. Any other value is looked up as it is: a part that does not exist is the
// resolver's 403, as before. Without this check PostgreSQL would refuse the lookup and
// the caller would get an internal error.
//
// A value longer than any part's name (MaxPartBytes, what the membership table allows)
// is refused too, without being repeated: the resolver's refusal quoted it whole, so a
// request of a few kilobytes came back in the answer.
func CheckPart(part string) error {
	if err := text.Check(part); err != nil {
		return apperr.New(apperr.Invalid, "?part= %v", err)
	}
	if len(part) > MaxPartBytes {
		return apperr.New(apperr.Invalid, "?part= is longer than %d characters: no part has such a name", MaxPartBytes)
	}
	return nil
}

// MaxPartBytes is the longest part name (membership.part: 1-63 lowercase letters,
// digits, '-' or '_').
const MaxPartBytes = 63
