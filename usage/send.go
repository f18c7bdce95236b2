package usage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// maxAnswerBytes is the most of a sink's answer body read (and thrown
// away, so the connection can be reused); a larger answer closes it.
const maxAnswerBytes = 64 << 10

// record is one CloudEvent of a batch, fixed from its first post on.
type record struct {
	ev    cloudEvent
	units int64
}

// cloudEvent is a CloudEvents 1.0 event in its JSON format.
type cloudEvent struct {
	SpecVersion     string `json:"specversion"`
	Type            string `json:"type"`
	Source          string `json:"source"`
	ID              string `json:"id"`
	Time            string `json:"time"`
	Subject         string `json:"subject,omitempty"`
	DataContentType string `json:"datacontenttype"`
	Data            any    `json:"data"`
}

// The CloudEvents types of the records.
const (
	TypeUsage  = "dev.tollgate.usage.v1"
	TypeNotice = "dev.tollgate.usage.threshold.v1"
)

// usageData is a usage record's data.
type usageData struct {
	Consumer    string `json:"consumer"`
	Plan        string `json:"plan,omitempty"`
	Limit       string `json:"limit"`
	Period      string `json:"period"`
	PeriodStart string `json:"period_start"`
	PeriodEnd   string `json:"period_end"`
	Units       int64  `json:"units"`
	Requests    int64  `json:"requests"`
}

// noticeData is a threshold notice's data.
type noticeData struct {
	Consumer    string  `json:"consumer"`
	Plan        string  `json:"plan,omitempty"`
	Limit       string  `json:"limit"`
	Rate        string  `json:"rate"`
	Period      string  `json:"period"`
	PeriodStart string  `json:"period_start"`
	PeriodEnd   string  `json:"period_end"`
	Threshold   float64 `json:"threshold"`
	Used        int64   `json:"used"`
	Capacity    int64   `json:"capacity"`
}

func stamp(us int64) string { return time.UnixMicro(us).UTC().Format(time.RFC3339Nano) }

// usageRecord turns a cut entry into a record with a fresh id.
func (e *Exporter) usageRecord(c cutEntry, now time.Time) record {
	id := e.instance + "-" + strconv.FormatUint(e.seq.Add(1), 10)
	return record{units: c.e.units, ev: cloudEvent{
		SpecVersion: "1.0", Type: TypeUsage, Source: e.o.Source, ID: id,
		Time: now.UTC().Format(time.RFC3339Nano), Subject: c.k.consumer, DataContentType: "application/json",
		Data: usageData{Consumer: c.k.consumer, Plan: c.e.plan, Limit: c.k.limit, Period: c.k.period,
			PeriodStart: stamp(c.k.start), PeriodEnd: stamp(c.e.end), Units: c.e.units, Requests: c.e.requests},
	}}
}

// noticeRecord turns a claimed crossing into a record.
func (e *Exporter) noticeRecord(n notice) record {
	return record{ev: cloudEvent{
		SpecVersion: "1.0", Type: TypeNotice, Source: e.o.Source, ID: n.k.id(),
		Time: n.at.UTC().Format(time.RFC3339Nano), Subject: n.k.consumer, DataContentType: "application/json",
		Data: noticeData{Consumer: n.k.consumer, Plan: n.plan, Limit: n.k.limit, Rate: n.rate, Period: n.period,
			PeriodStart: stamp(n.k.start), PeriodEnd: stamp(n.end), Threshold: n.k.threshold,
			Used: n.used, Capacity: n.capacity},
	}}
}

// cycle posts what the aggregate holds: first the batch a previous cycle
// did not deliver, then the claimed notices and every entry born before
// this cycle, in batches. final (Close) takes every entry. It returns
// early when ctx ends, leaving the undelivered batch frozen.
func (e *Exporter) cycle(ctx context.Context, final bool) {
	if len(e.frozen) > 0 && !e.deliver(ctx) {
		return
	}
	c := ^uint64(0)
	if !final {
		c = e.agg.cycle.Add(1)
	}
	e.claimNotices(ctx)
	notes := e.takeReady()
	keys := e.agg.eligible(c)
	bs := e.o.BatchSize
	for len(notes) > 0 || len(keys) > 0 {
		batch := make([]record, 0, bs)
		for len(batch) < bs && len(notes) > 0 {
			batch = append(batch, e.noticeRecord(notes[0]))
			notes = notes[1:]
		}
		n := min(bs-len(batch), len(keys))
		now := time.Now()
		for _, ce := range e.agg.take(keys[:n]) {
			batch = append(batch, e.usageRecord(ce, now))
		}
		keys = keys[n:]
		if len(batch) == 0 {
			continue
		}
		e.frozen = batch
		e.frozenKey = e.instance + "-batch-" + strconv.FormatUint(e.seq.Add(1), 10)
		e.inFlight.Store(int64(len(batch)))
		if !e.deliver(ctx) {
			e.unready(notes)
			return
		}
	}
}

// deliver posts the frozen batch until the sink accepts it, refuses it
// rejectAttempts times (dropped) or ctx ends (false: still frozen).
func (e *Exporter) deliver(ctx context.Context) bool {
	batch := e.frozen
	body, err := json.Marshal(events(batch))
	if err != nil { // cannot happen: the data are plain structs
		e.log.Error("usage: encoding records", "err", err)
		body = []byte("[]")
	}
	// The batch's key: the same on every retry, never another batch's
	// (a notice id is shared by every gateway, so a batch is not named
	// after its first record).
	idem := e.frozenKey
	backoff := initialBackoff
	maxBackoff := max(e.o.FlushInterval, time.Second)
	refused := 0
	for {
		status, wait, err := e.post(ctx, body, idem)
		if err == nil && status/100 == 2 {
			e.accepted(batch)
			return true
		}
		e.failures.Add(1)
		permanent := err == nil && !retryable(status)
		if permanent {
			refused++
			if refused >= rejectAttempts {
				e.drop(batch, status)
				return true
			}
		}
		if s, ok := e.failLog.Allow(time.Now()); ok {
			reason := fmt.Sprint(err)
			if err == nil {
				reason = "status " + strconv.Itoa(status)
			}
			e.log.Warn("usage: posting records failed; retrying", "sink", e.redacted, "err", reason,
				"records", len(batch), "suppressed", s)
		}
		if ctx.Err() != nil {
			return false
		}
		if wait > 0 {
			wait = min(wait, maxBackoff) // Retry-After, honoured up to the cap
		} else {
			wait = backoff/2 + rand.N(backoff/2+1)
		}
		backoff = min(backoff*2, maxBackoff)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}

// retryable reports whether a failed status is worth retrying as it is:
// a server error, 408 (timeout) or 429 (too many requests). Other
// statuses (3xx, 4xx) are the receiver's verdict on the batch.
func retryable(status int) bool {
	return status >= 500 || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests
}

func events(batch []record) []cloudEvent {
	out := make([]cloudEvent, len(batch))
	for i := range batch {
		out[i] = batch[i].ev
	}
	return out
}

// accepted counts a delivered batch.
func (e *Exporter) accepted(batch []record) {
	for _, r := range batch {
		if r.ev.Type == TypeNotice {
			e.notes.Add(1)
		} else {
			e.records.Add(1)
			e.units.Add(r.units)
		}
	}
	e.frozen = nil
	e.inFlight.Store(0)
}

// drop gives up a batch the sink refused.
func (e *Exporter) drop(batch []record, status int) {
	var units int64
	for _, r := range batch {
		units += r.units
	}
	e.droppedRecords.Add(int64(len(batch)))
	e.droppedUnits.Add(units)
	e.frozen = nil
	e.inFlight.Store(0)
	e.log.Error("usage: the sink refused records; dropped", "sink", e.redacted, "status", status,
		"attempts", rejectAttempts, "records", len(batch), "units", units)
}

// post sends one batch and returns the answer's status and Retry-After.
func (e *Exporter) post(ctx context.Context, body []byte, idem string) (int, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, e.o.Timeout)
	defer cancel() // after the body is read: the timeout covers it
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.sink.String(), bytes.NewReader(body))
	if err != nil {
		return 0, 0, errors.New("building the request failed")
	}
	req.Header.Set("Content-Type", "application/cloudevents-batch+json; charset=utf-8")
	req.Header.Set("Idempotency-Key", idem)
	resp, err := e.client.Do(req)
	if err != nil {
		// url.Error repeats the URL (its user name included): keep the
		// cause only; the log names the sink redacted.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswerBytes))
	resp.Body.Close()
	var wait time.Duration
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		wait = time.Duration(min(s, 3600)) * time.Second
	}
	return resp.StatusCode, wait, nil
}
