// Package policy compiles Tollgate's configuration (a config.Config, the
// TOML document of the README's "Configuration reference") into an
// immutable Policy: routes, limits, identity, header styles, store and
// listener settings, which the proxy consults on every request, including
// route matching (Match).
//
// Compile validates as it compiles and reports every problem with its
// field path; it reads secrets through the getenv and readFile functions
// it is given, never from the process directly.
package policy
