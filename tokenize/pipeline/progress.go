package pipeline

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress reports documents, tokens and input bytes while a run goes on: a bar on a terminal (by input bytes,
// with ETA), or a plain line every interval otherwise.
type progress struct {
	docs, tokens atomic.Int64
	bytesRead    func() int64
	total        int64
	start        time.Time
	quit         chan struct{}
	wg           sync.WaitGroup
	once         sync.Once
}

func newProgress(w io.Writer, interval time.Duration, total int64, bytesRead func() int64) *progress {
	p := &progress{bytesRead: bytesRead, total: total, start: time.Now(), quit: make(chan struct{})}
	if w == nil {
		return p
	}
	f, isFile := w.(*os.File)
	tty := isFile && term.IsTerminal(int(f.Fd()))
	var bar *progressbar.ProgressBar
	if tty {
		bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionShowBytes(true),
			progressbar.OptionSetDescription("tokenize"),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
		interval = 250 * time.Millisecond
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				if bar != nil {
					_ = bar.Finish()
				}
				return
			case <-t.C:
				if bar != nil {
					_ = bar.Set64(p.bytesRead())
					bar.Describe(p.rates())
				} else {
					fmt.Fprintf(w, "tokenize: %s\n", p.line())
				}
			}
		}
	}()
	return p
}

func (p *progress) add(docs, tokens int64) {
	p.docs.Add(docs)
	p.tokens.Add(tokens)
}

func (p *progress) rates() string {
	secs := time.Since(p.start).Seconds()
	if secs <= 0 {
		secs = 1e-9
	}
	return fmt.Sprintf("%.0f rows/s %.1f MB/s %.2fM tok/s", float64(p.docs.Load())/secs,
		float64(p.bytesRead())/secs/1e6, float64(p.tokens.Load())/secs/1e6)
}

func (p *progress) line() string {
	read := p.bytesRead()
	eta := "?"
	secs := time.Since(p.start).Seconds()
	if read > 0 && p.total > 0 {
		left := time.Duration(float64(p.total-read) / (float64(read) / secs) * float64(time.Second))
		eta = left.Round(time.Second).String()
	}
	pct := 0.0
	if p.total > 0 {
		pct = 100 * float64(read) / float64(p.total)
	}
	return fmt.Sprintf("%.1f%% of %.1f MB, %d rows, %d tokens, %s, ETA %s", pct, float64(p.total)/1e6,
		p.docs.Load(), p.tokens.Load(), p.rates(), eta)
}

func (p *progress) stop() {
	p.once.Do(func() {
		close(p.quit)
		p.wg.Wait()
	})
}
