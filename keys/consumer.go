package keys

// Consumers: the registered clients an API key or a verified token names.

// Consumer is a registered client as identity resolution sees it: a name
// that keys count by instead of whichever of its keys a request carries,
// and a plan. Consumers are built once per configuration (package
// consumers) and shared read-only by every request.
type Consumer struct {
	// Name is the consumer's name, unique in its registry.
	Name string
	// Plan is the consumer's plan, "" for none.
	Plan string
	// PlanIndex is Plan's position in Config.Plans plus one; 0 for none.
	PlanIndex int
	// Custom reports that the consumer has rates of its own for some
	// limit, which the policy looks up by the consumer's pointer.
	Custom bool
}

// Directory finds registered consumers. It must be safe for concurrent
// use and, since it runs on every request that carries a key, must not
// allocate.
type Directory interface {
	// ByKey returns the consumer owning the API key, or nil.
	ByKey(apiKey string) *Consumer
	// ByName returns the consumer named name, or nil.
	ByName(name string) *Consumer
}

// UnknownKey is what a request whose API key no consumer owns gets.
type UnknownKey uint8

// The unknown_api_key values.
const (
	// UnknownKeyReject marks the identity Rejected: the request is
	// answered 401 and counted nowhere.
	UnknownKeyReject UnknownKey = iota
	// UnknownKeyAnonymous ignores the key: the next identity source
	// decides who the client is.
	UnknownKeyAnonymous
)

// ConsumerConfig configures consumer resolution (Config.Consumers). Its
// zero value is not usable; a nil *ConsumerConfig means no registry:
// any API key is a client of its own.
type ConsumerConfig struct {
	// Directory holds the registered consumers. Required.
	Directory Directory
	// UnknownKey is what an API key no consumer owns means.
	UnknownKey UnknownKey
	// JWTClaim, when set, is the claim of a verified token that names a
	// registered consumer.
	JWTClaim string
	// PlanClaim, when set, is the claim of a verified token that names
	// the plan of a client no registered consumer matched.
	PlanClaim string
	// Plans are the plan names, in configuration order; PlanIndex counts
	// from one in it.
	Plans []string
}

// setConsumer makes c the identity's consumer, with its plan.
func (id *Identity) setConsumer(c *Consumer) {
	id.Consumer = c
	id.Plan, id.PlanIndex = c.Plan, c.PlanIndex
}

// ConsumerName returns the name of the identity's consumer, "" when the
// request comes from none.
func (id *Identity) ConsumerName() string {
	if id.Consumer == nil {
		return ""
	}
	return id.Consumer.Name
}

// WithDirectory returns a copy of e that finds consumers in d, or e itself
// when e resolves no consumers. Replay uses it to name a logged consumer
// by a key of its own making: the log holds no plaintext key.
func (e *Extractor) WithDirectory(d Directory) *Extractor {
	if e.consumers == nil || d == nil {
		return e
	}
	c := *e
	cc := *e.consumers
	cc.Directory = d
	c.consumers = &cc
	return &c
}
