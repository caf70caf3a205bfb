package desk

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/httpapi"
	"github.com/relayroom/relayroom/internal/pg"
)

// Limits are the calls allowed per Window: per member and per workspace, reads and
// writes counted apart.
type Limits struct {
	Window          time.Duration
	MemberReads     int
	MemberWrites    int
	WorkspaceReads  int
	WorkspaceWrites int
}

func (l Limits) check() error {
	if l.Window < time.Second || l.MemberReads < 1 || l.MemberWrites < 1 || l.WorkspaceReads < 1 || l.WorkspaceWrites < 1 {
		return errors.New("a window of at least a second and limits of at least 1 are required")
	}
	return nil
}

// DefaultLimits are the limits by plan (plans without MCP access have none: they are
// refused before any call is counted).
func DefaultLimits() map[string]Limits {
	return map[string]Limits{
		PlanGrowth: {Window: time.Minute, MemberReads: 120, MemberWrites: 20, WorkspaceReads: 600, WorkspaceWrites: 100},
		PlanScale:  {Window: time.Minute, MemberReads: 300, MemberWrites: 60, WorkspaceReads: 3000, WorkspaceWrites: 600},
	}
}

// hit counts one call against the member's limit and, while the member is within it, the
// workspace's, in one statement of its own short transaction (the counters' rows are
// locked only for that statement, never for the tool's work), and refuses the call when
// either is spent. A call the member's limit refuses does not count against the
// workspace: one runaway client is refused alone, its team is not.
func (s *Service) hit(ctx context.Context, c caller, write bool) error {
	l := s.limits[c.plan]
	kind, memberMax, workspaceMax := "read", l.MemberReads, l.WorkspaceReads
	if write {
		kind, memberMax, workspaceMax = "write", l.MemberWrites, l.WorkspaceWrites
	}
	now := s.clock()
	arg := db.DeskRateHitParams{OrgID: c.org, WindowStart: now.Truncate(l.Window),
		First: "member:" + c.user.String() + ":" + kind, Second: "workspace:" + kind, FirstMax: int32(memberMax)}
	rows, err := s.countHits(ctx, c, arg)
	if err != nil {
		return err
	}
	for _, r := range rows {
		who, max := "Member", memberMax
		if r.Subject == arg.Second {
			who, max = "Workspace", workspaceMax
		}
		if int(r.Hits) > max {
			return rateLimited(fmt.Sprintf("%s %s-call limit exceeded.", who, kind), r.WindowStart.Add(l.Window).Sub(now))
		}
	}
	return nil
}

// countHits counts one call against arg's first subject and, while that is within
// arg.FirstMax, its second (DeskRateHit), in one statement of its own short transaction
// (one round trip), and answers the counts: the first's, and the second's when counted.
func (s *Service) countHits(ctx context.Context, c caller, arg db.DeskRateHitParams) ([]db.DeskRateHitRow, error) {
	var rows []db.DeskRateHitRow
	err := s.db.InTenant(pg.WithoutClaim(ctx), c.tenant(), func(tx *pg.Tx) (err error) {
		// The count stands whatever the call does next: the COMMIT rides with it.
		tx.CommitWithNext(ctx)
		rows, err = s.q.DeskRateHit(ctx, tx, arg)
		return err
	})
	if err != nil {
		return nil, pg.Classify("desk: rate limit", err)
	}
	if !slices.ContainsFunc(rows, func(r db.DeskRateHitRow) bool { return r.Subject == arg.First }) || len(rows) > 2 {
		return nil, fmt.Errorf("desk: rate limit: %d counters answered", len(rows))
	}
	return rows, nil
}

// rateLimited is RATE_LIMITED with the whole seconds until the window ends (at least 1).
func rateLimited(msg string, left time.Duration) error {
	e := apperr.New(apperr.RateLimited, "%s", msg)
	e.Details = map[string]any{httpapi.RetryAfterDetail: max1(int(math.Ceil(left.Seconds())))}
	return e
}

func max1(n int) int { return max(n, 1) }

// FormatLimits writes limits as RELAYROOM_DESK_RATE_LIMITS reads them:
// plan=memberReads/memberWrites/workspaceReads/workspaceWrites per minute, comma-separated.
func FormatLimits(m map[string]Limits) string {
	parts := make([]string, 0, len(m))
	for _, plan := range slices.Sorted(maps.Keys(m)) {
		l := m[plan]
		parts = append(parts, fmt.Sprintf("%s=%d/%d/%d/%d", plan, l.MemberReads, l.MemberWrites, l.WorkspaceReads, l.WorkspaceWrites))
	}
	return strings.Join(parts, ",")
}

// ParseLimits reads FormatLimits' form. Both plans with MCP access must be given.
func ParseLimits(s string) (map[string]Limits, error) {
	out := map[string]Limits{}
	for _, part := range strings.Split(s, ",") {
		plan, nums, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || (plan != PlanGrowth && plan != PlanScale) {
			return nil, fmt.Errorf("%q: want growth=… and scale=…, each memberReads/memberWrites/workspaceReads/workspaceWrites per minute", part)
		}
		var n [4]int
		fields := strings.Split(nums, "/")
		if len(fields) != 4 {
			return nil, fmt.Errorf("%q: want four numbers: memberReads/memberWrites/workspaceReads/workspaceWrites", part)
		}
		for i, f := range fields {
			v, err := strconv.Atoi(f)
			if err != nil {
				return nil, fmt.Errorf("%q: %w", part, err)
			}
			n[i] = v
		}
		l := Limits{Window: time.Minute, MemberReads: n[0], MemberWrites: n[1], WorkspaceReads: n[2], WorkspaceWrites: n[3]}
		if err := l.check(); err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		out[plan] = l
	}
	for _, p := range []string{PlanGrowth, PlanScale} {
		if _, ok := out[p]; !ok {
			return nil, fmt.Errorf("no limits for the %s plan", p)
		}
	}
	return out, nil
}
