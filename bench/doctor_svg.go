package bench

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"strings"

	"github.com/gload/gload/loader/gpuwatch"
)

// phaseColors colour the step phases of the doctor's report.
var phaseColors = map[string]string{
	gpuwatch.PhaseData: "#d62728", gpuwatch.PhaseForward: "#1f77b4", gpuwatch.PhaseBackward: "#2ca02c",
	gpuwatch.PhaseOptimizer: "#ff7f0e", gpuwatch.PhaseSync: "#9467bd", gpuwatch.PhaseHost: "#8c564b",
	gpuwatch.PhaseOther: "#bbbbbb",
}

// WriteDoctorSVG draws the doctor's report as one self-contained SVG: the
// diagnosis in words, each GPU's SM utilisation over the run (the success
// criteria's 70/40/30% lines, the judged span shaded) and, below it on the
// same time axis, every counted step's phases stacked in milliseconds.
func WriteDoctorSVG(w io.Writer, r *DoctorResult) error {
	const (
		width, left, right = 960, 60, 30
		headH, panelH, gap = 120, 220, 50
		height             = headH + 2*panelH + gap + 70
		iw                 = width - left - right
	)
	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	esc := html.EscapeString
	d := r.Diagnosis
	xMax := max(r.Run.Seconds, 1)
	for _, s := range r.Steps {
		xMax = max(xMax, s.T)
	}
	for _, s := range r.SMPoints {
		for _, pt := range s.Points {
			xMax = max(xMax, pt.T)
		}
	}
	xMax = niceCeil(xMax)
	x := func(t float64) float64 { return left + t/xMax*iw }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	title := "gload doctor — " + strings.Join(r.Run.Command, " ")
	if len([]rune(title)) > 110 {
		title = string([]rune(title)[:109]) + "…"
	}
	p(`<text x="%d" y="20" font-size="15" font-weight="bold">%s</text>`+"\n", left, esc(title))
	p(`<text x="%d" y="42" font-size="14">cause: <tspan font-weight="bold">%s</tspan> (evidence: %s)</text>`+"\n", left, esc(string(d.Cause)), esc(d.Evidence))
	y := 60
	for i, n := range d.Numbers {
		if i == 3 {
			break
		}
		if len([]rune(n)) > 140 {
			n = string([]rune(n)[:139]) + "…"
		}
		p(`<text x="%d" y="%d">%s</text>`+"\n", left, y, esc(n))
		y += 15
	}
	crit := "criteria: not judged (no GPU figures)"
	if d.GPU >= 0 {
		met := "met"
		if !d.CriteriaMet {
			met = "not met"
		}
		crit = fmt.Sprintf("criteria (median ≥ 70%%, P10 ≥ 40%%, < 10%% of time below 30%%): SM median %.1f%%, P10 %.1f%%, below 30%% %.1f%%: %s",
			d.SMMedian, d.SMP10, 100*d.SMBelowShare, met)
	}
	p(`<text x="%d" y="%d">%s</text>`+"\n", left, headH-8, esc(crit))

	// Panel 1: SM utilisation.
	top := headH
	py := func(v float64) float64 { return float64(top) + (1-v/100)*panelH }
	axes := func(top int, label string, yMax float64, unit string) {
		p(`<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", left, top, iw, panelH)
		p(`<text x="12" y="%d" transform="rotate(-90 12 %d)" text-anchor="middle">%s</text>`+"\n", top+panelH/2, top+panelH/2, esc(label))
		for i := 0; i <= 4; i++ {
			v := yMax * float64(i) / 4
			yy := float64(top) + (1-float64(i)/4)*panelH
			p(`<text x="%d" y="%.1f" text-anchor="end">%s%s</text>`+"\n", left-4, yy+4, trimFloat(v), unit)
		}
	}
	axes(top, "SM utilisation (%)", 100, "")
	if r.Span.Seconds > 0 {
		p(`<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#f3f3c8"/>`+"\n", x(r.Span.FromS), top, max(x(r.Span.ToS)-x(r.Span.FromS), 1), panelH)
	}
	for _, l := range []float64{smLowLine, smP10Line, smMedLine} {
		p(`<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#999" stroke-dasharray="4 3"/>`+"\n", left, left+iw, py(l), py(l))
	}
	for i, s := range r.SMPoints {
		if len(s.Points) == 0 {
			continue
		}
		c := palette[i%len(palette)]
		var pts strings.Builder
		for _, pt := range s.Points {
			fmt.Fprintf(&pts, "%.1f,%.1f ", x(pt.T), py(pt.V))
		}
		p(`<polyline fill="none" stroke="#%02x%02x%02x" stroke-width="1.2" points="%s"/>`+"\n", c.R, c.G, c.B, strings.TrimSpace(pts.String()))
		p(`<text x="%d" y="%d" fill="#%02x%02x%02x">GPU %d</text>`+"\n", left+iw-60, top+16+14*i, c.R, c.G, c.B, s.GPU)
	}
	if len(r.SMPoints) == 0 {
		msg := "no GPU visible"
		if r.Run.NoGPU != "" {
			msg += ": " + r.Run.NoGPU
		}
		if len([]rune(msg)) > 120 {
			msg = string([]rune(msg)[:119]) + "…"
		}
		p(`<text x="%d" y="%d" text-anchor="middle" fill="#666">%s</text>`+"\n", left+iw/2, top+panelH/2, esc(msg))
	}

	// Panel 2: step phases, stacked.
	top2 := headH + panelH + gap
	yMax := 0.0
	for _, s := range r.Steps {
		sum := 0.0
		for _, v := range s.Phases {
			sum += v
		}
		yMax = max(yMax, sum)
	}
	yMax = niceCeil(max(yMax, 1))
	basis := "host"
	if d.Phases != nil && d.Phases.Basis == "GPU time" {
		basis = "GPU"
	}
	axes(top2, "step phases ("+basis+" ms)", yMax, "")
	bar := max(float64(iw)/float64(max(len(r.Steps), 1))*0.9, 0.6)
	bar = min(bar, 12)
	for _, s := range r.Steps {
		yy := float64(top2 + panelH)
		for _, name := range gpuwatch.PhaseNames {
			v := s.Phases[name]
			if v <= 0 {
				continue
			}
			h := v / yMax * panelH
			yy -= h
			p(`<rect x="%.1f" y="%.1f" width="%.2f" height="%.2f" fill="%s"/>`+"\n", x(s.T), yy, bar, h, phaseColors[name])
		}
	}
	if len(r.Steps) == 0 {
		p(`<text x="%d" y="%d" text-anchor="middle" fill="#666">no step phases recorded (use gload.doctor.Doctor in the loop)</text>`+"\n", left+iw/2, top2+panelH/2)
	}
	lx := left
	for _, name := range gpuwatch.PhaseNames {
		p(`<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", lx, top2-14, phaseColors[name], lx+14, top2-5, name)
		lx += 100
	}
	// Shared time axis.
	for i := 0; i <= 10; i++ {
		t := xMax * float64(i) / 10
		p(`<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(t), top2+panelH+16, trimFloat(t))
	}
	p(`<text x="%d" y="%d" text-anchor="middle">seconds since the command started (shaded: the judged span)</text>`+"\n", left+iw/2, top2+panelH+36)
	p("</svg>\n")
	return bw.Flush()
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.1f", v)
	return strings.TrimSuffix(s, ".0")
}
