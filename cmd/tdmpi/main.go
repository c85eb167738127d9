// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Exit statuses of tdmpi.
const (
	exitOK      = 0 // the command succeeded
	exitFailure = 1 // the command failed
	exitUsage   = 2 // the command line is wrong
)

// command is one subcommand of tdmpi.
type command struct {
	name  string // as typed: "inspect"
	args  string // the synopsis after the name: "[-json] DIR|FILE"
	short string // one line for the command list
	long  string // the description -h prints above the flags

	// flags declares the command's flags on fs and returns the function
	// that runs the command with the arguments left after the flags.
	flags func(fs *flag.FlagSet, io *stdio) func(args []string) error
}

// stdio holds the streams a command writes to.
type stdio struct {
	out, err io.Writer
}

// commands lists tdmpi's commands in the order usage shows them.
var commands = []*command{
	inspectCmd,
	benchCmd,
	envCmd,
	versionCmd,
}

// usageError is an error in the command line: tdmpi exits with status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// usagef returns a usageError with a formatted message.
func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

func main() {
	os.Exit(run(os.Args[1:], &stdio{out: os.Stdout, err: os.Stderr}))
}

// run runs the tdmpi command line args (without the program name) and
// returns the exit status.
func run(args []string, sio *stdio) int {
	if len(args) == 0 {
		mainUsage(sio.err)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		if name == "help" && len(args) > 1 {
			if c := lookup(args[1]); c != nil {
				fs, _ := c.flagSet(sio)
				fs.Usage()
				return exitOK
			}
			fmt.Fprintf(sio.err, "tdmpi help %s: unknown command\n", args[1])
			return exitUsage
		}
		mainUsage(sio.err)
		return exitOK
	}
	c := lookup(name)
	if c == nil {
		fmt.Fprintf(sio.err, "tdmpi %s: unknown command\nRun 'tdmpi -h' for usage.\n", name)
		return exitUsage
	}
	return c.run(args[1:], sio)
}

// lookup returns the command called name, or nil.
func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// flagSet returns c's flag set, writing its usage to sio.err, and the
// function that runs c.
func (c *command) flagSet(sio *stdio) (*flag.FlagSet, func([]string) error) {
	fs := flag.NewFlagSet("tdmpi "+c.name, flag.ContinueOnError)
	fs.SetOutput(sio.err)
	runFn := c.flags(fs, sio)
	fs.Usage = func() {
		fmt.Fprintf(sio.err, "usage: %s\n\n%s\n", strings.TrimSpace("tdmpi "+c.name+" "+c.args), strings.TrimSpace(c.long))
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintf(sio.err, "\nFlags:\n")
			fs.PrintDefaults()
		}
	}
	return fs, runFn
}

// run parses args as c's flags and arguments, runs c and returns the exit
// status. Errors are printed to sio.err prefixed with "tdmpi <name>: ".
func (c *command) run(args []string, sio *stdio) int {
	fs, runFn := c.flagSet(sio)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		// The flag package has printed the error and the usage.
		return exitUsage
	}
	err := runFn(fs.Args())
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(sio.err, "tdmpi %s: %v\n", c.name, err)
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(sio.err, "Run 'tdmpi %s -h' for usage.\n", c.name)
		return exitUsage
	}
	return exitFailure
}

// mainUsage prints the list of commands to w.
func mainUsage(w io.Writer) {
	fmt.Fprintf(w, "Tdmpi inspects saved TensorDicts and measures tdmpi's transfers over MPI.\n\n")
	fmt.Fprintf(w, "Usage:\n\n\ttdmpi <command> [flags] [arguments]\n\nThe commands are:\n\n")
	for _, c := range commands {
		fmt.Fprintf(w, "\t%-9s %s\n", c.name, c.short)
	}
	fmt.Fprintf(w, "\nUse \"tdmpi <command> -h\" for more information about a command.\n")
	fmt.Fprintf(w, "Exit status: 0 success, 1 failure, 2 usage error.\n")
}
