package policy

import "github.com/tollgate/gateway/policy/config"

func buildAccessLog(c *config.AccessLogConfig, e *problems) AccessLog {
	a := AccessLog{Path: c.Path, RawClient: c.RawClient}
	switch c.Format {
	case "combined":
		a.Format = LogCombined
	case "jsonl":
		a.Format = LogJSONL
	default:
		e.add("access_log.format", "unknown format %q (want \"combined\" or \"jsonl\")", c.Format)
	}
	saltSource(*c).check(e)
	a.FlushInterval = duration(c.FlushInterval, "access_log.flush_interval", true, e)
	return a
}
