package command

import (
	"fmt"
	"strings"
	"time"
)

// rateMeter estimates tiles per second over the last window of samples:
// the server's own figure is the average since the task started, which
// lags behind when a seed skips cached tiles fast and then renders slowly.
type rateMeter struct {
	window  time.Duration
	samples []sample
}

type sample struct {
	at        time.Time
	processed int64
}

func (m *rateMeter) add(at time.Time, processed int64) {
	m.samples = append(m.samples, sample{at, processed})
	cut := 0
	for cut < len(m.samples)-2 && at.Sub(m.samples[cut+1].at) >= m.window {
		cut++
	}
	m.samples = m.samples[cut:]
}

// rate is the recent rate, or fallback (the server's) while the samples
// span less than a second.
func (m *rateMeter) rate(fallback float64) float64 {
	if len(m.samples) < 2 {
		return fallback
	}
	first, last := m.samples[0], m.samples[len(m.samples)-1]
	span := last.at.Sub(first.at).Seconds()
	if span < 1 {
		return fallback
	}
	return float64(last.processed-first.processed) / span
}

// timeLeft is the remaining tiles at rate, 0 when unknown.
func timeLeft(remaining int64, rate float64) time.Duration {
	if rate <= 0 || remaining <= 0 {
		return 0
	}
	return time.Duration(float64(remaining) / rate * float64(time.Second))
}

// clock writes a duration as 1:02:03 or 2:03; "--:--" when unknown.
func clock(d time.Duration) string {
	if d <= 0 {
		return "--:--"
	}
	s := int64(d.Round(time.Second) / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

func fmtRate(r float64) string {
	if r >= 100 {
		return fmt.Sprintf("%.0f tiles/s", r)
	}
	return fmt.Sprintf("%.1f tiles/s", r)
}

func percent(done, total int64) float64 {
	if total <= 0 {
		return 100
	}
	return 100 * float64(done) / float64(total)
}

// headLine names the task being followed, once, above its progress.
func headLine(t taskInfo) string {
	return fmt.Sprintf("task %d: %s of %s, %s %s, levels %d-%d, %d tiles", t.ID, strings.ToLower(t.Type), t.Layer,
		t.Gridset, t.Format, t.ZoomStart, t.ZoomStop, t.Total)
}

// barLine is the progress bar, width columns wide at most:
//
//	[=======>        ]  45%  1234/2730 tiles  52.3 tiles/s  0:28 left
func barLine(t taskInfo, rate float64, width int, note string) string {
	var tail string
	switch {
	case t.Status == statusPending:
		tail = fmt.Sprintf(" PENDING  0/%d tiles  waiting for a worker", t.Total)
	case t.finished():
		tail = fmt.Sprintf(" %3.0f%%  %d/%d tiles  %s  %s", percent(t.Processed, t.Total), t.Processed, t.Total, fmtRate(rate), t.State)
	default:
		tail = fmt.Sprintf(" %3.0f%%  %d/%d tiles  %s  %s left", percent(t.Processed, t.Total), t.Processed, t.Total,
			fmtRate(rate), clock(timeLeft(t.Remaining, rate)))
	}
	if t.FailedTiles > 0 {
		tail += fmt.Sprintf("  %d failed", t.FailedTiles)
	}
	if note != "" {
		tail += "  " + note
	}
	// A third of the line, whatever the numbers' length (a bar that
	// changed size as they grow would jump), less if the numbers and a
	// note would not fit beside it.
	barW := min(width/3, 40, width-len([]rune(tail))-2)
	if barW < 10 {
		// A narrow terminal: the numbers matter more than the bar.
		return truncateRunes(strings.TrimSpace(tail), width)
	}
	fill := int(float64(barW) * percent(t.Processed, t.Total) / 100)
	if t.Status == statusPending {
		fill = 0
	}
	bar := strings.Repeat("=", fill)
	if fill < barW {
		if fill > 0 {
			bar = bar[:fill-1] + ">"
		}
		bar += strings.Repeat(" ", barW-fill)
	}
	return truncateRunes("["+bar+"]"+tail, width)
}

func truncateRunes(s string, n int) string {
	r := []rune(s)
	if n > 0 && len(r) > n {
		return string(r[:n])
	}
	return s
}

// plainLine is one progress line for a log or a cron mail.
func plainLine(now time.Time, t taskInfo, rate float64) string {
	s := fmt.Sprintf("%s task %d %s %s %s", now.Format(time.RFC3339), t.ID, t.Type, t.Layer, t.State)
	if t.Status == statusPending {
		return s + fmt.Sprintf(" 0/%d tiles, waiting for a worker", t.Total)
	}
	s += fmt.Sprintf(" %d/%d tiles (%.1f%%), %s", t.Processed, t.Total, percent(t.Processed, t.Total), fmtRate(rate))
	if !t.finished() {
		s += ", " + clock(timeLeft(t.Remaining, rate)) + " left"
	}
	if t.FailedTiles > 0 {
		s += fmt.Sprintf(", %d failed tiles", t.FailedTiles)
	}
	return s
}
