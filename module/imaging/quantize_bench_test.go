package imaging

import (
	"image"
	"image/color"
	"slices"
	"syscall"
	"testing"
)

// BenchmarkQuantize quantizes and encodes every tile of each bench set to
// 256 colours, with this package's quantizer ("ours", "ours-dither") and
// with a plain median cut as MapCache 1.14 does it ("mediancut", below),
// reporting per tile the time of quantizing alone (quant_ns/tile, wall
// clock; cpu_ns/tile, the process's CPU time, steadier on a loaded
// machine), the mean PNG bytes beside the lossless PNG's, and PSNR
// against the tile, median and worst. allocs/op is per set: about 259 a
// tile, 256 of them the boxed palette entries.
//
//	go test ./module/imaging/ -run '^$' -bench 'BenchmarkQuantize$'
func BenchmarkQuantize(b *testing.B) {
	quantizers := []struct {
		name string
		q    func(image.Image) *image.Paletted
	}{
		{"ours", func(m image.Image) *image.Paletted { return quantize(m, 256, false) }},
		{"ours-dither", func(m image.Image) *image.Paletted { return quantize(m, 256, true) }},
		{"mediancut", func(m image.Image) *image.Paletted { return medianCutPeer(m, 256) }},
	}
	for _, set := range benchSets() {
		for _, qz := range quantizers {
			b.Run(set.name+"/"+qz.name, func(b *testing.B) {
				st := measureCorpus(b, set, qz.q)
				b.ReportAllocs()
				cpu0 := cpuTime()
				for b.Loop() {
					for _, tile := range set.tiles {
						qz.q(tile)
					}
				}
				n := float64(len(set.tiles))
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/n, "cpu_ns/tile")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "quant_ns/tile")
				b.ReportMetric(float64(st.bytes8)/n, "B/tile")
				b.ReportMetric(float64(st.bytesLossless)/n, "lossless_B/tile")
				b.ReportMetric(st.psnrMedian, "dB_median")
				b.ReportMetric(st.psnrWorst, "dB_worst")
			})
		}
	}
}

// cpuTime is the process's CPU time so far (user and system), in ns: on a
// loaded machine a better measure of work than the wall clock.
func cpuTime() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// medianCutPeer is the quantizer MapCache 1.14 uses for <colors>, as a
// baseline to measure against on the same tiles: Heckbert's median cut as
// pngquant 1.0 has it (split the box of most pixels, along the channel of
// widest range, alpha first on ties, at the median pixel; each entry the
// pixel-weighted mean of its box), then every colour mapped to its
// nearest entry by exhaustive search. MapCache quantizes premultiplied
// pixels; on opaque tiles, all the corpus's dense ones, that makes no
// difference.
func medianCutPeer(m image.Image, colors int) *image.Paletted {
	q := new(quantizer)
	q.histogram(m)
	out := &image.Paletted{Pix: make([]uint8, len(q.ids)), Stride: q.w, Rect: m.Bounds()}
	if len(q.bins) <= colors {
		q.exact(out)
		return out
	}
	items := make([]qitem, len(q.bins))
	for i, k := range q.bins {
		items[i] = itemOf(k, q.count[i], int32(i))
	}
	type pbox struct{ lo, hi, sum int }
	boxes := []pbox{{0, len(items), q.w * q.h}}
	for len(boxes) < colors {
		bi := slices.IndexFunc(boxes, func(b pbox) bool { return b.hi-b.lo >= 2 })
		if bi < 0 {
			break
		}
		bx := boxes[bi]
		part := items[bx.lo:bx.hi]
		lo, hi := part[0].c, part[0].c
		for _, it := range part {
			for ch, v := range it.c {
				lo[ch], hi[ch] = min(lo[ch], v), max(hi[ch], v)
			}
		}
		axis := 3
		for _, ch := range []int{0, 1, 2} {
			if hi[ch]-lo[ch] > hi[axis]-lo[axis] {
				axis = ch
			}
		}
		slices.SortFunc(part, func(x, y qitem) int { return int(x.c[axis]) - int(y.c[axis]) })
		lower, i := int(part[0].n), 1
		for ; i < len(part)-1 && lower < bx.sum/2; i++ {
			lower += int(part[i].n)
		}
		boxes[bi] = pbox{bx.lo, bx.lo + i, lower}
		boxes = append(boxes, pbox{bx.lo + i, bx.hi, bx.sum - lower})
		slices.SortStableFunc(boxes, func(x, y pbox) int { return y.sum - x.sum })
	}
	pal := make([][4]int32, len(boxes))
	out.Palette = make(color.Palette, len(boxes))
	for j, bx := range boxes {
		var s boxStats
		for _, it := range items[bx.lo:bx.hi] {
			s.add(it)
		}
		pal[j] = entryOf(s).c
		out.Palette[j] = color.NRGBA{uint8(pal[j][0]), uint8(pal[j][1]), uint8(pal[j][2]), uint8(pal[j][3])}
	}
	assign := make([]uint8, len(q.bins))
	for i, k := range q.bins {
		c, best := colourOf(k), int32(1<<30)
		for j, p := range pal {
			if d := dist4(c, p); d < best {
				best, assign[i] = d, uint8(j)
			}
		}
	}
	for i, id := range q.ids {
		out.Pix[i] = assign[id]
	}
	return out
}
