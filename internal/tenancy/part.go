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
func CheckPart(part string) error {
	if err := text.Check(part); err != nil {
		return apperr.New(apperr.Invalid, "?part= %v", err)
	}
	return nil
}
