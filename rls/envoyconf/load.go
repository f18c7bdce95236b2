package envoyconf

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tollgate/gateway/ratelimit"
)

// Bounds of the files Load accepts. A file past one of them is refused
// with an error naming the bound, before the memory it would take is
// spent.
const (
	// MaxFileBytes bounds one file's size.
	MaxFileBytes = 4 << 20
	// MaxNodes bounds the YAML nodes visited in one file, each alias's
	// target counted again every time it is referred to: a billion-laughs
	// document stops here, after at most this many steps.
	MaxNodes = 1 << 20
	// MaxDepth bounds how deeply descriptors nest.
	MaxDepth = 32
	// MaxRules bounds the descriptors of all files together.
	MaxRules = 100_000
	// MaxFiles bounds the number of files: a deployment of a domain per
	// tenant writes thousands of them.
	MaxFiles = 10_000
	// MaxTotalBytes bounds all the files together (MaxFiles files of
	// MaxFileBytes each would be 40 GiB).
	MaxTotalBytes = 64 << 20
)

// Unit is a rate_limit's unit, as the reference names them.
type Unit uint8

// The units. The reference's month is 30 days and its year 365.
const (
	Second Unit = iota + 1
	Minute
	Hour
	Day
	Week
	Month
	Year
)

var unitNames = [...]string{Second: "SECOND", Minute: "MINUTE", Hour: "HOUR", Day: "DAY", Week: "WEEK", Month: "MONTH", Year: "YEAR"}

var unitSeconds = [...]int64{Second: 1, Minute: 60, Hour: 3600, Day: 86400, Week: 7 * 86400, Month: 30 * 86400, Year: 365 * 86400}

// String returns the unit's name in capitals, e.g. "MINUTE".
func (u Unit) String() string {
	if u == 0 || int(u) >= len(unitNames) {
		return "UNKNOWN"
	}
	return unitNames[u]
}

// Duration returns the unit's length: the window of a fixed window rule.
func (u Unit) Duration() time.Duration {
	if u == 0 || int(u) >= len(unitSeconds) {
		return 0
	}
	return time.Duration(unitSeconds[u]) * time.Second
}

// parseUnit reads a unit case-insensitively, as the reference does.
func parseUnit(s string) (Unit, bool) {
	up := strings.ToUpper(s)
	for u, name := range unitNames {
		if u != 0 && name == up {
			return Unit(u), true
		}
	}
	return 0, false
}

// File is one configuration file: its name (for errors) and content.
type File struct {
	Name string
	Data []byte
}

// Rule is the limit of one descriptor path of a domain.
type Rule struct {
	// Domain is the rule's domain.
	Domain string
	// Path is the reference's full key of the rule: the domain and each
	// level's key or key_value joined by dots, e.g.
	// "edge.remote_address.path_/api". It comes from the configuration
	// only, so it is a bounded metric label.
	Path string
	// Name is rate_limit.name ("" when unnamed); Replaces the names of
	// the rules this one replaces when both match one request.
	Name     string
	Replaces []string
	// RequestsPerUnit and Unit are the rule's numbers as configured.
	RequestsPerUnit uint32
	Unit            Unit
	// Unlimited rules answer OK and count nothing.
	Unlimited bool
	// DenyAll is a rule of 0 requests per unit: every hit is over the
	// limit, and nothing is counted.
	DenyAll bool
	// Shadow answers OK whatever the limit decides (shadow_mode).
	Shadow bool
	// DetailedMetric is the descriptor's detailed_metric, kept as read:
	// metrics stay labelled by Path, bounded by the configuration.
	DetailedMetric bool
	// Limit is the compiled limit; nil for Unlimited and DenyAll rules.
	Limit *ratelimit.Limit
	// Metadata is the descriptor's metadata, nil when it has none. It is
	// shared by every call: never modify it.
	Metadata *structpb.Struct
	// Base is, for a rule built from a request's own limit
	// (RequestLimit), the domain's request-limit rule whose Path labels
	// its metrics; nil for a configured rule.
	Base *Rule
}

// node is one level of a domain's descriptor tree.
type node struct {
	children  map[string]*node
	wildcards []wildcard
	rule      *Rule
	// share is set for a wildcard descriptor with share_threshold: every
	// value it matches counts on one counter, keyed by pattern.
	share   bool
	pattern string
}

// wildcard is a child whose key_value contains '*', split once.
type wildcard struct {
	key   string
	parts []string
}

// Config is a compiled set of files: domains and their descriptor trees.
// Its domains and rules are immutable once loaded (only the bounded
// cache of request-limit rules grows); it is safe for concurrent use.
type Config struct {
	domains map[string]*node
	rules   []*Rule
	// requests holds each domain's request-limit rule (RequestLimit),
	// built at load; reqRules the rules built from requests' limits, at
	// most MaxRequestRules of them.
	requests map[string]*Rule
	reqRules sync.Map // reqKey → *Rule
	reqCount atomic.Int32
}

// Rules returns every rule, in the order the files list them.
func (c *Config) Rules() []*Rule {
	if c == nil {
		return nil
	}
	return c.rules
}

// Domains returns the number of domains.
func (c *Config) Domains() int {
	if c == nil {
		return 0
	}
	return len(c.domains)
}

// Load reads and checks files as the reference does and compiles them.
// The error joins every file's first problem, each as
// "NAME: PATH: problem (line N)".
func Load(files []File) (*Config, error) {
	c := &Config{domains: make(map[string]*node), requests: make(map[string]*Rule)}
	if len(files) > MaxFiles {
		return nil, fmt.Errorf("%d files, more than %d", len(files), MaxFiles)
	}
	total := 0
	for _, f := range files {
		total += len(f.Data)
	}
	if total > MaxTotalBytes {
		return nil, fmt.Errorf("%d bytes in all files, more than %d", total, MaxTotalBytes)
	}
	var errs []error
	for _, f := range files {
		if err := c.loadFile(f); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// loadError is a problem at a YAML path of a file.
type loadError struct {
	file, path, msg string
	line            int
}

func (e *loadError) Error() string {
	s := e.file + ": "
	if e.path != "" {
		s += e.path + ": "
	}
	s += e.msg
	if e.line > 0 {
		s += " (line " + strconv.Itoa(e.line) + ")"
	}
	return s
}

// loader reads one file.
type loader struct {
	c      *Config
	file   string
	budget int
	err    *loadError
}

func (ld *loader) fail(n *yaml.Node, path, format string, args ...any) {
	if ld.err != nil {
		return
	}
	line := 0
	if n != nil {
		line = n.Line
	}
	ld.err = &loadError{file: ld.file, path: path, msg: fmt.Sprintf(format, args...), line: line}
}

// resolve follows aliases and charges the node budget.
func (ld *loader) resolve(n *yaml.Node, path string) *yaml.Node {
	for hops := 0; n != nil && n.Kind == yaml.AliasNode; hops++ {
		if hops > MaxDepth {
			ld.fail(n, path, "alias chain longer than %d", MaxDepth)
			return nil
		}
		n = n.Alias
	}
	ld.budget--
	if ld.budget < 0 {
		ld.fail(n, path, "more than %d YAML nodes (aliases counted every time they are used)", MaxNodes)
		return nil
	}
	return n
}

func (c *Config) loadFile(f File) error {
	ld := &loader{c: c, file: f.Name, budget: MaxNodes}
	if len(f.Data) > MaxFileBytes {
		return &loadError{file: f.Name, msg: fmt.Sprintf("larger than %d bytes", MaxFileBytes)}
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(f.Data, &doc); err != nil {
		return &loadError{file: f.Name, msg: "not YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if doc.Kind == 0 {
		return &loadError{file: f.Name, msg: "config file cannot have empty domain"}
	}
	root := ld.resolve(&doc, "")
	if root != nil && root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = ld.resolve(root.Content[0], "")
	}
	if ld.err != nil {
		return ld.err
	}
	if root.Kind != yaml.MappingNode {
		ld.fail(root, "", "want a mapping with domain and descriptors")
		return ld.err
	}
	var domain string
	var descs *yaml.Node
	ld.fields(root, "", func(key string, v *yaml.Node, path string) {
		switch key {
		case "domain":
			domain = ld.str(v, path)
		case "descriptors":
			descs = v
		default:
			ld.fail(v, path, "unknown key '%s'", key)
		}
	})
	if ld.err != nil {
		return ld.err
	}
	if domain == "" {
		ld.fail(root, "domain", "config file cannot have empty domain")
		return ld.err
	}
	if _, dup := c.domains[domain]; dup {
		ld.fail(root, "domain", "duplicate domain '%s' in config file", domain)
		return ld.err
	}
	top := &node{children: map[string]*node{}}
	if descs != nil {
		ld.descriptors(top, domain, descs, "descriptors", domain+".", 1)
	}
	if ld.err != nil {
		return ld.err
	}
	c.domains[domain] = top
	c.requests[domain] = &Rule{Domain: domain, Path: domain + RequestLimitPath}
	return nil
}

// fields calls fn for every key of the mapping m in order, with the
// value resolved and the key's path.
func (ld *loader) fields(m *yaml.Node, path string, fn func(key string, v *yaml.Node, path string)) {
	for i := 0; i+1 < len(m.Content) && ld.err == nil; i += 2 {
		k := ld.resolve(m.Content[i], path)
		if ld.err != nil {
			return
		}
		if k.Kind != yaml.ScalarNode || (k.Tag != "!!str" && k.Tag != "") {
			ld.fail(k, path, "config error, key is not of type string: %s", clip(k.Value))
			return
		}
		p := k.Value
		if path != "" {
			p = path + "." + k.Value
		}
		v := ld.resolve(m.Content[i+1], p)
		if ld.err != nil {
			return
		}
		if k.Value == "<<" {
			ld.fail(k, p, "merge keys are not supported")
			return
		}
		fn(k.Value, v, p)
	}
}

// str reads a string scalar; null reads as "".
func (ld *loader) str(v *yaml.Node, path string) string {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return ""
	}
	if v.Kind != yaml.ScalarNode {
		ld.fail(v, path, "want a string")
		return ""
	}
	return v.Value
}

// boolean reads a YAML boolean.
func (ld *loader) boolean(v *yaml.Node, path string) bool {
	var b bool
	if v.Kind != yaml.ScalarNode || v.Decode(&b) != nil {
		ld.fail(v, path, "want true or false, got %s", clip(v.Value))
	}
	return b
}

// trunc bounds a value written into an error.
func trunc(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// clip bounds a value quoted in an error.
func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.Quote(s)
}

// descriptorSpec is one descriptor as read, before it is compiled.
type descriptorSpec struct {
	key, value     string
	rl             *yaml.Node
	rlPath         string
	children       *yaml.Node
	childrenPath   string
	shadow, detail bool
	share          bool
	algorithm      string
	burst          int64
	precision      time.Duration
	penalty        time.Duration
	sync           string
	syncInterval   time.Duration
	leaseSize      int64
	extPath        string
	extNode        *yaml.Node
	meta           *yaml.Node
	metaPath       string
}

func (ld *loader) descriptors(parent *node, domain string, list *yaml.Node, path, parentKey string, depth int) {
	if list.Kind == yaml.ScalarNode && list.Tag == "!!null" {
		return
	}
	if list.Kind != yaml.SequenceNode {
		ld.fail(list, path, "want a list of descriptors")
		return
	}
	if depth > MaxDepth {
		ld.fail(list, path, "descriptors nested more than %d deep", MaxDepth)
		return
	}
	for i, item := range list.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		item = ld.resolve(item, p)
		if ld.err != nil {
			return
		}
		if item.Kind != yaml.MappingNode {
			ld.fail(item, p, "config error, yaml file contains list of type other than map")
			return
		}
		d := ld.readDescriptor(item, p)
		if ld.err != nil {
			return
		}
		ld.addDescriptor(parent, domain, d, item, p, parentKey, depth)
		if ld.err != nil {
			return
		}
	}
}

func (ld *loader) readDescriptor(item *yaml.Node, p string) *descriptorSpec {
	d := &descriptorSpec{}
	ld.fields(item, p, func(key string, v *yaml.Node, path string) {
		switch key {
		case "key":
			d.key = ld.str(v, path)
		case "value":
			d.value = ld.str(v, path)
		case "rate_limit":
			d.rl, d.rlPath = v, path
		case "descriptors":
			d.children, d.childrenPath = v, path
		case "shadow_mode":
			d.shadow = ld.boolean(v, path)
		case "detailed_metric":
			d.detail = ld.boolean(v, path)
		case "share_threshold":
			d.share = ld.boolean(v, path)
		case "value_to_metric":
			ld.boolean(v, path) // metrics are labelled by the configured path
		case "metadata":
			// Arbitrary, as in the reference: answered in
			// dynamic_metadata when the descriptor passes.
			d.meta, d.metaPath = v, path
		case "quota_mode":
			if ld.boolean(v, path) {
				ld.fail(v, path, "quota_mode is not supported (Tollgate's own quota algorithm is: algorithm: quota)")
			}
		case "algorithm":
			d.algorithm = ld.str(v, path)
			d.extNode, d.extPath = v, path
		case "burst":
			if v.Kind != yaml.ScalarNode || v.Decode(&d.burst) != nil || d.burst <= 0 {
				ld.fail(v, path, "want a positive integer, got %s", clip(v.Value))
			}
			d.extNode, d.extPath = v, path
		case "sync":
			d.sync = ld.str(v, path)
			if d.sync != "exact" && d.sync != "batched" {
				ld.fail(v, path, "unknown value %s (want exact or batched)", clip(d.sync))
			}
			d.extNode, d.extPath = v, path
		case "lease_size":
			if v.Kind != yaml.ScalarNode || v.Decode(&d.leaseSize) != nil || d.leaseSize <= 0 {
				ld.fail(v, path, "want a positive integer, got %s", clip(v.Value))
			}
			d.extNode, d.extPath = v, path
		case "precision", "penalty", "sync_interval":
			dur, err := ratelimit.ParseDuration(ld.str(v, path))
			if err != nil || dur <= 0 {
				ld.fail(v, path, "want a positive duration such as 10s, got %s", clip(v.Value))
			}
			switch key {
			case "precision":
				d.precision = dur
			case "penalty":
				d.penalty = dur
			default:
				d.syncInterval = dur
			}
			d.extNode, d.extPath = v, path
		default:
			ld.fail(v, path, "config error, unknown key '%s'", key)
		}
	})
	return d
}

func (ld *loader) addDescriptor(parent *node, domain string, d *descriptorSpec, item *yaml.Node, p, parentKey string, depth int) {
	if d.key == "" {
		ld.fail(item, p+".key", "descriptor has empty key")
		return
	}
	finalKey := d.key
	if d.value != "" {
		finalKey += "_" + d.value
	}
	fullKey := parentKey + finalKey
	if _, dup := parent.children[finalKey]; dup {
		ld.fail(item, p, "duplicate descriptor composite key '%s'", fullKey)
		return
	}
	n := &node{children: map[string]*node{}}
	var meta *structpb.Struct
	if d.meta != nil {
		// Read even where no rate_limit uses it, so a bad one is refused
		// as the reference refuses it.
		meta = ld.metadata(d.meta, d.metaPath)
		if ld.err != nil {
			return
		}
	}
	if d.rl != nil {
		n.rule = ld.rule(domain, fullKey, d)
		if ld.err != nil {
			return
		}
		n.rule.Metadata = meta
	} else if d.extNode != nil {
		ld.fail(d.extNode, d.extPath, "applies only to a descriptor with a rate_limit")
		return
	}
	if d.share {
		if !strings.Contains(finalKey, "*") {
			ld.fail(item, p+".share_threshold", "share_threshold can only be used with wildcard values (containing '*'), but found key '%s'", finalKey)
			return
		}
		n.share = true
		n.pattern = strings.TrimPrefix(finalKey, d.key+"_")
	}
	if strings.Contains(finalKey, "*") {
		parent.wildcards = append(parent.wildcards, wildcard{key: finalKey, parts: strings.Split(finalKey, "*")})
	}
	parent.children[finalKey] = n
	if d.children != nil {
		ld.descriptors(n, domain, d.children, d.childrenPath, fullKey+".", depth+1)
	}
}

// rule reads a descriptor's rate_limit and compiles its limit.
func (ld *loader) rule(domain, fullKey string, d *descriptorSpec) *Rule {
	r := &Rule{Domain: domain, Path: fullKey, Shadow: d.shadow, DetailedMetric: d.detail}
	rl := d.rl
	if rl.Kind != yaml.MappingNode {
		ld.fail(rl, d.rlPath, "want a mapping with unit and requests_per_unit")
		return nil
	}
	var unit string
	ld.fields(rl, d.rlPath, func(key string, v *yaml.Node, path string) {
		switch key {
		case "unit":
			unit = ld.str(v, path)
		case "requests_per_unit":
			var n uint32
			if v.Kind != yaml.ScalarNode || v.Decode(&n) != nil {
				ld.fail(v, path, "want an integer in 0..4294967295, got %s", clip(v.Value))
			}
			r.RequestsPerUnit = n
		case "unlimited":
			r.Unlimited = ld.boolean(v, path)
		case "name":
			r.Name = ld.str(v, path)
		case "replaces":
			ld.replaces(r, v, path)
		default:
			ld.fail(v, path, "config error, unknown key '%s'", key)
		}
	})
	if ld.err != nil {
		return nil
	}
	u, valid := parseUnit(unit)
	if r.Unlimited {
		if valid {
			ld.fail(rl, d.rlPath+".unit", "should not specify rate limit unit when unlimited")
			return nil
		}
	} else if !valid {
		ld.fail(rl, d.rlPath+".unit", "invalid rate limit unit '%s'", trunc(unit))
		return nil
	}
	r.Unit = u
	for i, name := range r.Replaces {
		p := fmt.Sprintf("%s.replaces[%d].name", d.rlPath, i)
		if name == "" {
			ld.fail(rl, p, "should not have an empty replaces entry")
			return nil
		}
		if name == r.Name {
			ld.fail(rl, p, "replaces should not contain name of same descriptor")
			return nil
		}
	}
	if len(ld.c.rules) >= MaxRules {
		ld.fail(rl, d.rlPath, "more than %d rate limits in all files", MaxRules)
		return nil
	}
	ld.c.rules = append(ld.c.rules, r)
	switch {
	case r.Unlimited:
		if d.extNode != nil {
			ld.fail(d.extNode, d.extPath, "does not apply to an unlimited rate_limit")
		}
		return r
	case r.RequestsPerUnit == 0:
		if d.extNode != nil {
			ld.fail(d.extNode, d.extPath, "does not apply to a rate_limit of 0 requests")
		}
		r.DenyAll = true
		return r
	}
	l := &ratelimit.Limit{
		Name:      fullKey,
		Algorithm: ratelimit.FixedWindow,
		Rates:     []ratelimit.Rate{{Limit: int64(r.RequestsPerUnit), Window: u.Duration()}},
		Burst:     d.burst,
		Precision: d.precision,
		Penalty:   d.penalty,
		Shadow:    r.Shadow,
		Scope:     "rls",
	}
	if (d.syncInterval != 0 || d.leaseSize != 0) && d.sync != "batched" {
		ld.fail(d.extNode, d.extPath, `applies only with sync: batched`)
		return nil
	}
	if d.sync == "batched" {
		// As limits[].sync = "batched": every 100ms by default, leases of
		// a hundredth of the limit.
		b := &ratelimit.Batch{Interval: 100 * time.Millisecond, Lease: d.leaseSize}
		if d.syncInterval != 0 {
			b.Interval = d.syncInterval
		}
		if b.Lease == 0 {
			b.Lease = max(1, int64(r.RequestsPerUnit)/100)
		}
		if b.Lease > int64(r.RequestsPerUnit) {
			ld.fail(d.extNode, d.extPath, "lease_size must be at most requests_per_unit, %d, got %d", r.RequestsPerUnit, b.Lease)
			return nil
		}
		l.Batch = b
	}
	if d.algorithm != "" {
		a, err := ratelimit.ParseAlgorithm(d.algorithm)
		if err != nil || a == ratelimit.Concurrency {
			ld.fail(d.extNode, d.extPath, "unknown algorithm %s (want one of fixed_window, fixed_window_elastic, sliding_window_log, sliding_window_counter, token_bucket, gcra, quota)", clip(d.algorithm))
			return nil
		}
		l.Algorithm = a
	}
	if err := l.Finish(); err != nil {
		p := d.rlPath
		if d.extPath != "" {
			p = d.extPath
		}
		ld.fail(d.rl, p, "%v", err)
		return nil
	}
	r.Limit = l
	return r
}

func (ld *loader) replaces(r *Rule, v *yaml.Node, path string) {
	if v.Kind != yaml.SequenceNode {
		ld.fail(v, path, "want a list of {name: ...}")
		return
	}
	for i, e := range v.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		e = ld.resolve(e, p)
		if ld.err != nil {
			return
		}
		if e.Kind != yaml.MappingNode {
			ld.fail(e, p, "config error, yaml file contains list of type other than map")
			return
		}
		name := ""
		ld.fields(e, p, func(key string, v *yaml.Node, path string) {
			if key != "name" {
				ld.fail(v, path, "config error, unknown key '%s'", key)
				return
			}
			name = ld.str(v, path)
		})
		r.Replaces = append(r.Replaces, name)
	}
}

// metadata reads a descriptor's metadata mapping as the reference does:
// keys as written, numbers as numbers, true/false, null, strings,
// mappings and lists at any depth (the parser bounds it), aliases
// followed under the node budget. nil for null or an empty mapping.
func (ld *loader) metadata(v *yaml.Node, path string) *structpb.Struct {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		ld.fail(v, path, "error parsing metadata: want a mapping")
		return nil
	}
	st := ld.metaStruct(v, path)
	if ld.err != nil || len(st.GetFields()) == 0 {
		return nil
	}
	return st
}

func (ld *loader) metaStruct(m *yaml.Node, path string) *structpb.Struct {
	st := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(m.Content)/2)}
	for i := 0; i+1 < len(m.Content) && ld.err == nil; i += 2 {
		k := ld.resolve(m.Content[i], path)
		if ld.err != nil {
			return nil
		}
		if k.Kind != yaml.ScalarNode {
			ld.fail(k, path, "error parsing metadata: a key is not a scalar")
			return nil
		}
		p := path + "." + k.Value
		v := ld.resolve(m.Content[i+1], p)
		if ld.err != nil {
			return nil
		}
		st.Fields[k.Value] = ld.metaValue(v, p)
	}
	return st
}

func (ld *loader) metaValue(v *yaml.Node, path string) *structpb.Value {
	switch v.Kind {
	case yaml.MappingNode:
		return structpb.NewStructValue(ld.metaStruct(v, path))
	case yaml.SequenceNode:
		l := &structpb.ListValue{Values: make([]*structpb.Value, 0, len(v.Content))}
		for i, e := range v.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			if e = ld.resolve(e, p); ld.err != nil {
				return nil
			}
			l.Values = append(l.Values, ld.metaValue(e, p))
		}
		return structpb.NewListValue(l)
	}
	switch v.Tag {
	case "!!null":
		return structpb.NewNullValue()
	case "!!bool":
		var b bool
		if v.Decode(&b) == nil {
			return structpb.NewBoolValue(b)
		}
	case "!!int", "!!float":
		var f float64
		if v.Decode(&f) == nil {
			return structpb.NewNumberValue(f)
		}
	}
	return structpb.NewStringValue(v.Value)
}
