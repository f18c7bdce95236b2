package admin

import "github.com/tollgate/gateway/policy"

// describeLimit fills the dashboard row's account of what l does beyond
// counting: mode (enforce, shadow, tag), a partial roll-out, its
// expressions, its own answer's status and its Retry-After jitter.
func describeLimit(row *uiLimit, l *policy.Limit) {
	switch {
	case l.Tag != nil:
		row.Mode = "tag"
	case l.Shadow:
		row.Mode = "shadow"
	default:
		row.Mode = "enforce"
	}
	if l.EnforcePercent < 100 {
		p := l.EnforcePercent
		row.EnforcePercent = &p
	}
	if x := l.Exprs; x != nil {
		if x.When != nil {
			row.When = x.When.Text
		}
		if x.Key != nil {
			row.Key = x.Key.Text
		}
		if x.Cost != nil {
			row.CostExpr = x.Cost.Text
		}
	}
	if l.Answer != nil {
		row.AnswerStatus = l.Answer.Status
	}
	if l.Jitter > 0 {
		row.Jitter = l.Jitter.String()
	}
}
