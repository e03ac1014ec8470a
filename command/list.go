package command

import (
	"context"
	"flag"
	"fmt"

	"github.com/schedulearn/schedulearn/internal/termtext"
	"github.com/schedulearn/schedulearn/planner/api/client"
)

// list is what a list command (policy list, node list, queue list) has of
// its own; runList does the rest the same way for each: the -json flag
// and any the command adds, the planner's answer printed as JSON or as a
// table, or Empty where there is nothing to list.
type list[T any] struct {
	Name  string
	Empty string // e.g. "No nodes"
	// Flags adds the command's own flags (nil: none but -json).
	Flags func(fs *flag.FlagSet)
	Fetch func(ctx context.Context, cl *client.Client) ([]T, error)
	// Table is the rows to print, the header first.
	Table func(items []T) [][]string
	// Notes, when set, are the lines to print after the table ("" lines
	// are left out).
	Notes func(items []T) []string
}

func runList[T any](m *Meta, args []string, l list[T]) int {
	var asJSON bool
	fs := m.flagSet(l.Name)
	fs.BoolVar(&asJSON, "json", false, "")
	if l.Flags != nil {
		l.Flags(fs)
	}
	_, cl, ok := m.start(fs, args, l.Name)
	if !ok {
		return ExitUsage
	}
	items, err := l.Fetch(context.Background(), cl)
	if err != nil {
		return m.apiError(err)
	}
	if asJSON {
		return m.printJSON(items)
	}
	if len(items) == 0 {
		fmt.Fprintln(m.Out, l.Empty)
		return ExitOK
	}
	fmt.Fprintln(m.Out, formatList(l.Table(items)))
	if l.Notes != nil {
		for _, note := range l.Notes(items) {
			if note != "" {
				fmt.Fprintln(m.Out, termtext.Escape(note))
			}
		}
	}
	return ExitOK
}
