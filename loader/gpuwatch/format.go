package gpuwatch

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Format renders a report as a compact, human-readable table: the verdict
// with cause, fix and reasons, one line per GPU, one line per client.
func Format(r Report) string {
	var b strings.Builder
	v := r.Verdict
	b.WriteString("verdict: ")
	b.WriteString(string(v.State))
	if len(v.Devices) > 0 && v.State != StateFed {
		ids := make([]string, len(v.Devices))
		for i, d := range v.Devices {
			ids[i] = strconv.Itoa(d)
		}
		fmt.Fprintf(&b, " (GPU %s)", strings.Join(ids, ", "))
	}
	if v.State == StateInsufficient {
		fmt.Fprintf(&b, ", %.0f s left", v.SecondsLeft)
	}
	b.WriteByte('\n')
	if v.Cause != "" {
		fmt.Fprintf(&b, "  cause: %s\n  fix:   %s\n", v.Cause, v.Fix)
	}
	for _, why := range v.Reasons {
		fmt.Fprintf(&b, "  - %s\n", why)
	}
	fmt.Fprintf(&b, "window %.0f s at %s\n", r.WindowS, r.Time.UTC().Format(time.RFC3339))

	if len(r.Devices) > 0 {
		b.WriteByte('\n')
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "GPU\tname\tsamples\tSM p50\tp10\tp90\tspread\t<%.0f%%\tmem-ctl\tmem used\tPCIe rx\tPCIe tx\tpower\tSM clock\tverdict\n", r.Thresholds.Low)
		for _, d := range r.Devices {
			fmt.Fprintf(tw, "%d\t%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t%.1f\t%s\t%s\t%s\t%.0f W\t%.0f MHz\t%s\n",
				d.Index, orDash(d.Name), d.Samples, d.SMMedian, d.SMP10, d.SMP90, d.SMSpread, pct(d.SMBelowShare),
				d.MemCtlMedian, memory(d.MemUsed, d.MemTotal), rate(d.PCIeRx), rate(d.PCIeTx), d.PowerW, d.SMClockMHz,
				d.Verdict.State)
		}
		tw.Flush()
	}
	if len(r.Clients) > 0 {
		b.WriteByte('\n')
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "client\tgpu\tsteps\twait%\tstep ms\twait ms\tnot ready\tqueue\tempty\tnotes")
		for _, c := range r.Clients {
			gpu := "-"
			if c.Device >= 0 {
				gpu = strconv.Itoa(c.Device)
			}
			queue := fmt.Sprintf("%d/%d", c.QueueDepth, c.QueueCapacity)
			if c.Closed {
				queue = "closed"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.1f\t%.1f\t%d\t%s\t%s\t%s\n",
				c.Client, gpu, c.Steps, c.WaitShare*100, c.StepMS, c.WaitMS, c.NotReady, queue,
				pct(c.QueueEmptyShare), shortNotes(c, r.Thresholds))
		}
		tw.Flush()
	}
	if r.ClientsDropped > 0 {
		fmt.Fprintf(&b, "%d client reports dropped (too many clients)\n", r.ClientsDropped)
	}
	return b.String()
}

// shortNotes flags what stands out about a client in a few words (the
// report's Notes say it in sentences).
func shortNotes(c ClientReport, th Thresholds) string {
	var n []string
	if c.Waiting {
		n = append(n, "waits for data")
	}
	if c.Closed {
		n = append(n, "stream closed "+secs(c.ClosedS)+" ago")
	} else if c.Silent {
		n = append(n, "silent "+secs(c.SilentS))
	}
	for _, note := range c.Notes {
		if strings.Contains(note, "clock differs") {
			n = append(n, fmt.Sprintf("clock %+.1f s", c.SkewS))
		}
	}
	return strings.Join(n, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// memory formats used/total bytes in GiB.
func memory(used, total uint64) string {
	const gib = 1 << 30
	if total == 0 {
		return fmt.Sprintf("%.1f GiB", float64(used)/gib)
	}
	return fmt.Sprintf("%.1f/%.1f GiB", float64(used)/gib, float64(total)/gib)
}

// rate formats bytes per second with a decimal unit.
func rate(bps float64) string {
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%.1f GB/s", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.1f MB/s", bps/1e6)
	case bps >= 1e3:
		return fmt.Sprintf("%.1f kB/s", bps/1e3)
	}
	return fmt.Sprintf("%.0f B/s", bps)
}
