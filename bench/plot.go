package bench

import (
	"bufio"
	"fmt"
	"html"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"strings"
)

// Plot geometry, in pixels.
const (
	plotW, plotH                    = 960, 420
	padL, padR, padT, padB          = 60, 80, 44, 52
	innerW, innerH                  = plotW - padL - padR, plotH - padT - padB
	maxTitle                        = 90
	smLowLine, smMedLine, smP10Line = 30, 70, 40
)

// palette colours the GPUs' lines; feed is drawn in black.
var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xd6, 0x27, 0x28, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xff, 0x7f, 0x0e, 0xff},
	{0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0x17, 0xbe, 0xcf, 0xff},
}

// plotData is what both writers draw: axes ranges and the lines.
type plotData struct {
	title   string
	xMax    float64
	feedMax float64
	spanOn  bool
	from    float64
	to      float64
	sm      []Series
	feed    []SeriesPoint
}

func newPlotData(res *RunResult) plotData {
	d := plotData{sm: res.SM, feed: res.Feed, xMax: res.Seconds}
	for _, s := range d.sm {
		for _, p := range s.Points {
			d.xMax = max(d.xMax, p.T)
		}
	}
	for _, p := range d.feed {
		d.xMax = max(d.xMax, p.T)
		d.feedMax = max(d.feedMax, p.V)
	}
	d.xMax = niceCeil(max(d.xMax, 1))
	d.feedMax = niceCeil(max(d.feedMax*1.1, 1))
	if res.Span.Basis == SpanClientSteps {
		d.spanOn, d.from, d.to = true, res.Span.FromS, res.Span.ToS
	}
	title := fmt.Sprintf("%s — %s", res.Report.Verdict.State, strings.Join(res.Command, " "))
	if len([]rune(title)) > maxTitle {
		title = string([]rune(title)[:maxTitle-1]) + "…"
	}
	d.title = title
	return d
}

// niceCeil rounds v up to a round number (1, 1.2, 1.5, 2 … 8 times a power
// of ten) whose quarters are round too.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.2, 1.6, 2, 2.4, 3, 4, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func (d plotData) x(t float64) float64   { return padL + t/d.xMax*innerW }
func (d plotData) ySM(v float64) float64 { return padT + (1-v/100)*innerH }
func (d plotData) yFeed(v float64) float64 {
	return padT + (1-v/d.feedMax)*innerH
}

// ticks returns 5 evenly spaced values from 0 to top.
func ticks(top float64) []float64 {
	out := make([]float64, 5)
	for i := range out {
		out[i] = top * float64(i) / 4
	}
	return out
}

func num(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// WriteSVG draws the run: each GPU's SM utilisation (left axis, %) and the
// clients' feed rate (right axis, batches/s) over time, with the judged
// span shaded and the checklist's 30/40/70% lines dotted.
func WriteSVG(w io.Writer, res *RunResult) error {
	d := newPlotData(res)
	b := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", plotW, plotH, plotW, plotH)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	p(`<text x="%d" y="24" font-size="14">%s</text>`+"\n", padL, html.EscapeString(d.title))
	if d.spanOn {
		p(`<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#eeeeee"/>`+"\n", d.x(d.from), padT, max(d.x(d.to)-d.x(d.from), 0), innerH)
		p(`<text x="%.1f" y="%d" fill="#777">judged span</text>`+"\n", d.x(d.from)+4, padT+14)
	}
	for _, v := range []float64{smLowLine, smP10Line, smMedLine} {
		p(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#bbb" stroke-dasharray="2,3"/>`+"\n", padL, d.ySM(v), padL+innerW, d.ySM(v))
	}
	p(`<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", padL, padT, innerW, innerH)
	for _, v := range ticks(d.xMax) {
		p(`<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", d.x(v), padT+innerH+16, num(v))
	}
	p(`<text x="%d" y="%d" text-anchor="middle">time (s)</text>`+"\n", padL+innerW/2, plotH-10)
	for _, v := range ticks(100) {
		p(`<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", padL-6, d.ySM(v)+4, num(v))
	}
	p(`<text transform="translate(16,%d) rotate(-90)" text-anchor="middle">SM utilisation (%%)</text>`+"\n", padT+innerH/2)
	for _, v := range ticks(d.feedMax) {
		p(`<text x="%d" y="%.1f">%s</text>`+"\n", padL+innerW+6, d.yFeed(v)+4, num(v))
	}
	p(`<text transform="translate(%d,%d) rotate(90)" text-anchor="middle">feed (batches/s)</text>`+"\n", plotW-14, padT+innerH/2)
	poly := func(pts []SeriesPoint, y func(float64) float64, stroke, extra string) {
		if len(pts) == 0 {
			return
		}
		var sb strings.Builder
		for i, pt := range pts {
			if i > 0 {
				sb.WriteByte(' ')
			}
			fmt.Fprintf(&sb, "%.1f,%.1f", d.x(pt.T), y(pt.V))
		}
		p(`<polyline fill="none" stroke="%s" stroke-width="1.5"%s points="%s"/>`+"\n", stroke, extra, sb.String())
	}
	legendY := padT + 14
	legend := func(label, stroke, extra string) {
		lx := padL + innerW - 150
		p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", lx, legendY-4, lx+20, legendY-4, stroke, extra)
		p(`<text x="%d" y="%d">%s</text>`+"\n", lx+26, legendY, html.EscapeString(label))
		legendY += 16
	}
	for i, s := range d.sm {
		c := hex(palette[i%len(palette)])
		poly(s.Points, d.ySM, c, "")
		legend(fmt.Sprintf("GPU %d SM %%", s.GPU), c, "")
	}
	if len(d.feed) > 0 {
		poly(d.feed, d.yFeed, "black", ` stroke-dasharray="6,3"`)
		legend("feed batches/s", "black", ` stroke-dasharray="6,3"`)
	}
	if len(d.sm) == 0 {
		p(`<text x="%d" y="%d" fill="#a00">no GPU samples (%s)</text>`+"\n", padL+10, padT+innerH-10, html.EscapeString(res.GPUs))
	}
	p("</svg>\n")
	if err := b.Flush(); err != nil {
		return fmt.Errorf("write svg: %w", err)
	}
	return nil
}

func hex(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

// WritePNG draws what WriteSVG draws, without the words: tick numbers only
// (a 3×5 pixel font), the title and legend left out (GPU i is palette
// colour i; feed is black).
func WritePNG(w io.Writer, res *RunResult) error {
	d := newPlotData(res)
	img := image.NewRGBA(image.Rect(0, 0, plotW, plotH))
	fill(img, img.Bounds(), color.RGBA{0xff, 0xff, 0xff, 0xff})
	if d.spanOn {
		fill(img, image.Rect(int(d.x(d.from)), padT, int(d.x(d.to)), padT+innerH), color.RGBA{0xee, 0xee, 0xee, 0xff})
	}
	grey := color.RGBA{0xbb, 0xbb, 0xbb, 0xff}
	for _, v := range []float64{smLowLine, smP10Line, smMedLine} {
		y := d.ySM(v)
		for x := padL; x < padL+innerW; x += 5 {
			line(img, float64(x), y, float64(x+2), y, grey, 1)
		}
	}
	dark := color.RGBA{0x33, 0x33, 0x33, 0xff}
	line(img, padL, padT, padL+innerW, padT, dark, 1)
	line(img, padL, padT+innerH, padL+innerW, padT+innerH, dark, 1)
	line(img, padL, padT, padL, padT+innerH, dark, 1)
	line(img, padL+innerW, padT, padL+innerW, padT+innerH, dark, 1)
	for _, v := range ticks(d.xMax) {
		text(img, int(d.x(v))-len(num(v))*2, padT+innerH+8, num(v), dark)
	}
	for _, v := range ticks(100) {
		text(img, padL-6-len(num(v))*8, int(d.ySM(v))-5, num(v), dark)
	}
	for _, v := range ticks(d.feedMax) {
		text(img, padL+innerW+6, int(d.yFeed(v))-5, num(v), dark)
	}
	for i, s := range d.sm {
		polyline(img, d, s.Points, d.ySM, palette[i%len(palette)])
	}
	polyline(img, d, d.feed, d.yFeed, color.RGBA{0, 0, 0, 0xff})
	if err := png.Encode(w, img); err != nil {
		return fmt.Errorf("write png: %w", err)
	}
	return nil
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

func polyline(img *image.RGBA, d plotData, pts []SeriesPoint, y func(float64) float64, c color.RGBA) {
	for i := 1; i < len(pts); i++ {
		line(img, d.x(pts[i-1].T), y(pts[i-1].V), d.x(pts[i].T), y(pts[i].V), c, 2)
	}
}

// line draws a segment `width` pixels thick by stepping along its longer
// axis (a DDA), one square brush per step.
func line(img *image.RGBA, x0, y0, x1, y1 float64, c color.RGBA, width int) {
	steps := int(math.Ceil(math.Max(math.Abs(x1-x0), math.Abs(y1-y0))))
	if steps == 0 {
		steps = 1
	}
	for i := 0; i <= steps; i++ {
		f := float64(i) / float64(steps)
		x, y := int(math.Round(x0+f*(x1-x0))), int(math.Round(y0+f*(y1-y0)))
		for dy := 0; dy < width; dy++ {
			for dx := 0; dx < width; dx++ {
				if (image.Point{x + dx, y + dy}).In(img.Bounds()) {
					img.SetRGBA(x+dx, y+dy, c)
				}
			}
		}
	}
}

// glyphs is a 3×5 pixel font for tick labels: each row of a glyph is 3 bits.
var glyphs = map[rune][5]uint8{
	'0': {7, 5, 5, 5, 7}, '1': {2, 6, 2, 2, 7}, '2': {7, 1, 7, 4, 7}, '3': {7, 1, 7, 1, 7}, '4': {5, 5, 7, 1, 1},
	'5': {7, 4, 7, 1, 7}, '6': {7, 4, 7, 5, 7}, '7': {7, 1, 1, 1, 1}, '8': {7, 5, 7, 5, 7}, '9': {7, 5, 7, 1, 7},
	'.': {0, 0, 0, 0, 2}, 'e': {0, 7, 7, 4, 7}, '+': {0, 2, 7, 2, 0}, '-': {0, 0, 7, 0, 0},
}

// text draws s at (x, y) (top left) in the glyph font, scaled 2×.
func text(img *image.RGBA, x, y int, s string, c color.RGBA) {
	const scale = 2
	for _, r := range s {
		g, ok := glyphs[r]
		if ok {
			for row, bits := range g {
				for col := range 3 {
					if bits&(4>>col) != 0 {
						fill(img, image.Rect(x+col*scale, y+row*scale, x+(col+1)*scale, y+(row+1)*scale), c)
					}
				}
			}
		}
		x += 4 * scale
	}
}
