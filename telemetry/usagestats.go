package telemetry

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/metric"
)

// The usage export's metric names (Prometheus adds _total to counters).
const (
	MetricUsageRecords        = "tollgate.usage.records"
	MetricUsageNotices        = "tollgate.usage.notices"
	MetricUsageUnits          = "tollgate.usage.units"
	MetricUsagePostFailures   = "tollgate.usage.post_failures"
	MetricUsageDroppedUnits   = "tollgate.usage.dropped_units"
	MetricUsageDroppedRecords = "tollgate.usage.dropped_records"
	MetricUsageDroppedNotices = "tollgate.usage.dropped_notices"
	MetricUsagePending        = "tollgate.usage.pending"
)

// UsageStats are the usage export's counters (see package usage's
// Stats), read at each collection.
type UsageStats struct {
	Records, Notices, Units, Failures            int64
	DroppedUnits, DroppedRecords, DroppedNotices int64
	Pending                                      int64
}

// RegisterUsageStats exports the usage export's counters, read from read
// at each collection.
func RegisterUsageStats(meter metric.Meter, read func() UsageStats) (metric.Registration, error) {
	var err error
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		c, e := meter.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return c
	}
	records := counter(MetricUsageRecords, "{record}", "Usage records the sink accepted.")
	notices := counter(MetricUsageNotices, "{notice}", "Threshold notices the sink accepted.")
	units := counter(MetricUsageUnits, "{unit}", "Units in the usage records the sink accepted.")
	failures := counter(MetricUsagePostFailures, "{post}", "Posts to the usage sink that failed (error or non-2xx); retried, or dropped after repeated refusals.")
	dunits := counter(MetricUsageDroppedUnits, "{unit}", "Units not exported: aggregate full (usage.max_pending), refused by the sink, or undelivered at stop.")
	drecords := counter(MetricUsageDroppedRecords, "{record}", "Records (usage and notices) refused by the sink or undelivered at stop.")
	dnotices := counter(MetricUsageDroppedNotices, "{notice}", "Threshold crossings not noticed because usage.max_pending were remembered.")
	pending, e := meter.Int64ObservableGauge(MetricUsagePending, metric.WithUnit("{record}"),
		metric.WithDescription("Usage records and notices held in memory, not yet delivered."))
	err = errors.Join(err, e)
	if err != nil {
		return nil, err
	}
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := read()
		o.ObserveInt64(records, st.Records)
		o.ObserveInt64(notices, st.Notices)
		o.ObserveInt64(units, st.Units)
		o.ObserveInt64(failures, st.Failures)
		o.ObserveInt64(dunits, st.DroppedUnits)
		o.ObserveInt64(drecords, st.DroppedRecords)
		o.ObserveInt64(dnotices, st.DroppedNotices)
		o.ObserveInt64(pending, st.Pending)
		return nil
	}, records, notices, units, failures, dunits, drecords, dnotices, pending)
}
