// Command gateway is Tollgate: a reverse proxy with built-in rate limiting.
//
//	gateway [serve] [flags]           run the gateway (the default command)
//	gateway validate [flags]          check a configuration; exit 0 with a summary, or 2 with every problem
//	gateway replay --log FILE [flags] replay an access log through the configured limits
//	gateway test [flags] CASES...     run limit tests (timed request scenarios) against the configuration
//	gateway version                   print the version
//	gateway help [command]            list the commands, or one command's flags
//
// main only wires: it parses flags, loads the configuration, builds the
// store and the handler, and runs the servers until a signal stops them.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitInvalid = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// command is one subcommand of gateway.
type command struct {
	name    string
	usage   string // the synopsis, after "usage: "
	summary string // one line, for the list of commands
}

// commands lists the subcommands in the order usage prints them. Each
// command's -help prints its synopsis, summary and flags (newFlagSet).
var commands = []command{
	{"serve", "gateway [serve] [flags]", "run the gateway (the default command)"},
	{"validate", "gateway validate [flags]", "check a configuration; print a summary, or every problem and exit 2"},
	{"replay", "gateway replay --log FILE [flags]", "replay an access log through the configured limits"},
	{"test", "gateway test [flags] CASES.toml...", "run limit tests: timed request scenarios on a virtual clock; exit 1 when one fails"},
	{"version", "gateway version", "print the version"},
}

// run runs the command with its arguments.
func (c *command) run(args, environ []string, stdout, stderr io.Writer) int {
	switch c.name {
	case "serve":
		return serveCommand(args, environ, stdout, stderr)
	case "validate":
		return validateCommand(args, environ, stdout, stderr)
	case "replay":
		return replayCommand(args, environ, stdout, stderr)
	case "test":
		return testCommand(args, environ, stdout, stderr)
	default:
		return versionCommand(args, environ, stdout, stderr)
	}
}

// lookupCommand returns the command named name, or nil.
func lookupCommand(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// run executes one command line and returns the process exit code. With
// no command, or flags first, the command is serve; -h, -help, --help and
// help print the list of commands, and help CMD that command's flags.
func run(args, environ []string, stdout, stderr io.Writer) int {
	name := "serve"
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help":
			usage(stdout)
			return exitOK
		case "help":
			if len(args) > 1 {
				if c := lookupCommand(args[1]); c != nil {
					return c.run([]string{"-help"}, environ, stdout, stdout)
				}
				fmt.Fprintf(stderr, "gateway help: unknown command %q\n", args[1])
				usage(stderr)
				return exitInvalid
			}
			usage(stdout)
			return exitOK
		}
		if !strings.HasPrefix(args[0], "-") {
			name, args = args[0], args[1:]
		}
	}
	c := lookupCommand(name)
	if c == nil {
		fmt.Fprintf(stderr, "gateway: unknown command %q\n", name)
		usage(stderr)
		return exitInvalid
	}
	return c.run(args, environ, stdout, stderr)
}

// usage prints the list of commands, the way Go's own tools do.
func usage(w io.Writer) {
	fmt.Fprint(w, "Tollgate is a reverse proxy with built-in rate limiting.\n\nUsage:\n\n\tgateway <command> [flags]\n\nThe commands are:\n\n")
	for _, c := range commands {
		fmt.Fprintf(w, "\t%-10s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nWith no command, or flags first, the command is serve.\n"+
		"Use \"gateway help <command>\" or \"gateway <command> -help\" for its flags.\n")
}

// versionCommand implements `gateway version`.
func versionCommand(args, _ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { commandUsage(fs, "version") }
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "gateway version: takes no arguments")
		return exitInvalid
	}
	fmt.Fprintln(stdout, "gateway", versionString())
	return exitOK
}

// commandUsage prints the synopsis, summary and flags of the command name
// to fs's output.
func commandUsage(fs *flag.FlagSet, name string) {
	w := fs.Output()
	if c := lookupCommand(name); c != nil {
		fmt.Fprintf(w, "usage: %s\n\n%s.\n", c.usage, strings.ToUpper(c.summary[:1])+c.summary[1:])
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprint(w, "\nFlags:\n")
		fs.PrintDefaults()
	}
}

// parseExit is the exit code of a flag parsing error: 0 when help was
// asked for (the usage is printed), 2 otherwise.
func parseExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitInvalid
}

func versionString() string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
		v += " " + bi.GoVersion
	}
	return v
}

// commonFlags are the flags every command that reads a config takes.
type commonFlags struct {
	config     string
	logLevel   string
	logFormat  string
	allowEmpty bool // serve and validate only; see addAllowEmpty
}

// addAllowEmpty registers --allow-empty, which accepts a configuration
// without routes (see requireRoutes).
func (f *commonFlags) addAllowEmpty(fs *flag.FlagSet) {
	fs.BoolVar(&f.allowEmpty, "allow-empty", false, "accept a configuration without routes (every request gets 404)")
}

// newFlagSet returns the flag set of the command name with the common
// flags, and a -help that prints the command's usage.
func newFlagSet(name string, stderr io.Writer, f *commonFlags) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { commandUsage(fs, name) }
	fs.StringVar(&f.config, "config", "gateway.toml", "path of the TOML configuration")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&f.logFormat, "log-format", "json", "log format: json or text")
	return fs
}

func newLogger(w io.Writer, f *commonFlags) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch f.logFormat {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format: want json or text, got %q", f.logFormat)
	}
}
