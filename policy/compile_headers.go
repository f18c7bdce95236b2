package policy

import (
	"fmt"

	"github.com/tollgate/gateway/headers"
)

func buildStyles(emit []string, e *problems) headers.Styles {
	styles := headers.Styles{}
	for i, s := range emit {
		st, err := headers.ParseStyle(s)
		if err != nil {
			e.add(fmt.Sprintf("headers.emit[%d]", i), "%v", err)
			continue
		}
		if styles.Has(st) {
			e.add(fmt.Sprintf("headers.emit[%d]", i), "duplicate style %q", s)
			continue
		}
		styles = append(styles, st)
	}
	return styles
}
