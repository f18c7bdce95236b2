package proxy

// liveUsage returns the units a candidate's token budget named name
// counts for q: what the live limit of that name finally counted
// (Event.Counted), else the most any live limit counted after the answer
// (the usage the upstream reported, as another budget read it), else
// cost (no live limit read the answer: the request's own cost, as with
// on_missing_usage = "cost"). A candidate decides after the answer, so
// it checks and counts the usage at once, where the live budget
// reserved an estimate first.
func liveUsage(q *request, name string, cost int64) int64 {
	ev := &q.ev
	if ev.Counted == nil {
		return cost
	}
	most, found := int64(-1), false
	for i, n := range ev.Counted {
		if i >= len(ev.Hits) || ev.Hits[i].Limit == nil {
			continue
		}
		if ev.Hits[i].Limit.Name == name {
			return n
		}
		most, found = max(most, n), true
	}
	if !found {
		return cost
	}
	return most
}
