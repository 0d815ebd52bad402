package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gload/gload/bench"
	"github.com/gload/gload/loader/access"
	"github.com/gload/gload/loader/gpuwatch"
	"github.com/gload/gload/proto/gloadpb"
)

type watchOptions struct {
	g         *globalOptions
	addr      string
	tokenFile string
	once      bool
	json      bool
	interval  time.Duration
}

func newWatchCmd(g *globalOptions) *cobra.Command {
	o := &watchOptions{g: g}
	cmd := &cobra.Command{
		Use:   "watch [--addr ADDR] [--once] [--json]",
		Short: "Show whether the GPUs are starved: the server's NVML watch beside its clients' data waits",
		Long: `Reads the starvation report of a running gload serve (its Watch RPC): per GPU the SM utilisation over the
watch window (median, P10, share below 30%), memory-controller utilisation, PCIe and power; per client the share of
time spent waiting for data, step time and queue depth; and the verdict (fed, starved: data, starved: not the
loader, no GPU visible) with its likely cause and usual fix.

On a terminal the view is redrawn in place every --interval; piped, it prints one line per report. --once prints one
report and exits; --json prints the report as JSON (one object per line).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", access.DefaultAddress(), "server address: unix:///path.sock or host:port (default: $GLOAD_ADDR, else the default socket of gload serve)")
	f.StringVar(&o.tokenFile, "auth-token-file", "", "file holding the server's bearer token (default: $GLOAD_AUTH_TOKEN or $GLOAD_AUTH_TOKEN_FILE)")
	f.BoolVar(&o.once, "once", false, "print one report and exit")
	f.BoolVar(&o.json, "json", false, "print reports as JSON (one object per line)")
	f.DurationVar(&o.interval, "interval", time.Second, "time between reports")
	return cmd
}

// isTerminal says whether w is a terminal (the live view redraws in place).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func (o *watchOptions) run(ctx context.Context, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.interval <= 0 {
		return fmt.Errorf("--interval %s: want > 0", o.interval)
	}
	tok := ""
	if o.tokenFile != "" {
		var err error
		if tok, err = access.ReadTokenFile(o.tokenFile); err != nil {
			return fmt.Errorf("--auth-token-file: %w", err)
		}
	}
	api, conn, err := bench.DialWatch(o.addr, tok)
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	defer conn.Close()
	ws, err := api.Watch(ctx, &gloadpb.WatchRequest{IntervalS: o.interval.Seconds(), Once: o.once})
	if err != nil {
		return watchErr(o.addr, err)
	}
	tty := !o.once && !o.json && isTerminal(out)
	for {
		m, err := ws.Recv()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil && ctx.Err() != nil:
			return nil // interrupted: a clean stop
		case err != nil:
			return watchErr(o.addr, err)
		}
		switch {
		case o.json:
			fmt.Fprintln(out, m.GetJson())
		case o.once:
			fmt.Fprint(out, m.GetText())
		case tty:
			// Home the cursor and clear the screen, then draw the report.
			fmt.Fprintf(out, "\x1b[H\x1b[2Jgload watch %s — every %s (Ctrl-C to stop)\n\n%s", o.addr, o.interval, m.GetText())
		default:
			fmt.Fprintln(out, watchLine(m))
		}
	}
}

// watchErr explains a failed Watch call.
func watchErr(addr string, err error) error {
	switch status.Code(err) {
	case codes.Unavailable:
		return fmt.Errorf("watch %s: %w (is gload serve running there?)", addr, err)
	case codes.Unimplemented:
		return fmt.Errorf("watch %s: the server has no Watch RPC (an older gload serve): %w", addr, err)
	}
	return fmt.Errorf("watch %s: %w", addr, err)
}

// watchLine renders a report as one line, for logs and pipes.
func watchLine(m *gloadpb.WatchReport) string {
	var r gpuwatch.Report
	if err := json.Unmarshal([]byte(m.GetJson()), &r); err != nil {
		return fmt.Sprintf("%s %s (report not readable: %v)", time.UnixMilli(m.GetTimeUnixMs()).UTC().Format(time.RFC3339), m.GetVerdict(), err)
	}
	parts := []string{r.Time.UTC().Format(time.RFC3339) + " " + string(r.Verdict.State)}
	for _, d := range r.Devices {
		if d.Lost {
			parts = append(parts, fmt.Sprintf("gpu%d lost", d.Index))
			continue
		}
		parts = append(parts, fmt.Sprintf("gpu%d SM p50 %.0f p10 %.0f <%.0f%% %.0f%% mem-ctl %.0f PCIe rx %.2f tx %.2f GB/s %.0f W",
			d.Index, d.SMMedian, d.SMP10, r.Thresholds.Low, 100*d.SMBelowShare, d.MemCtlMedian, d.PCIeRx/1e9, d.PCIeTx/1e9, d.PowerW))
	}
	for _, c := range r.Clients {
		s := fmt.Sprintf("%s wait %.1f%% step %.1f ms queue %d/%d", c.Client, 100*c.WaitShare, c.StepMS, c.QueueDepth, c.QueueCapacity)
		if c.Silent {
			s += fmt.Sprintf(" silent %.0f s", c.SilentS)
		}
		parts = append(parts, s)
	}
	if r.Verdict.Cause != "" && r.Verdict.State != gpuwatch.StateFed {
		parts = append(parts, "cause: "+r.Verdict.Cause+"; fix: "+r.Verdict.Fix)
	}
	if r.Verdict.State == gpuwatch.StateNoGPU && r.NoGPU != "" {
		parts = append(parts, r.NoGPU)
	}
	// One line whatever the names hold.
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.Join(parts, " | "))
}
