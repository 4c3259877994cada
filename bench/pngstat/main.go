// Command pngstat describes PNG files, for the peer benchmarks
// (bench/peers.sh): how many distinct colours a rendered metatile has (is
// the layer really "more than 256 colours"?), and what the tiles a cache
// stored look like (PNG colour type, size). Standard library only.
//
//	pngstat [-colors] FILE|DIR...
//
// Each FILE is reported on one line:
//
//	file=F bytes=N size=WxH type=rgb|rgba|palette|gray|graya depth=8 [colors=N opaque=true]
//
// A DIR is walked for *.png files (symbolic links followed as files) and
// summarised on one line instead:
//
//	dir=D files=N bytes=N mean_bytes=M types=rgb:N,palette:N,... [colors_mean=M colors_max=N over256=N flat=N]
//
// (flat: images of a single colour, such as open sea.)
//
// -colors decodes every image and counts distinct RGBA colours (slow for
// thousands of files). Only IHDR is read otherwise. Exit status 1 when a
// file is not a PNG.
package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/png"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

var colorTypes = map[byte]string{0: "gray", 2: "rgb", 3: "palette", 4: "graya", 6: "rgba"}

type info struct {
	bytes  int64
	w, h   uint32
	typ    string
	depth  byte
	colors int
	opaque bool
}

func inspect(path string, countColors bool) (info, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return info{}, err
	}
	var in info
	in.bytes = int64(len(b))
	if len(b) < 33 || !bytes.Equal(b[:8], []byte("\x89PNG\r\n\x1a\n")) || string(b[12:16]) != "IHDR" {
		return in, errors.New("not a PNG")
	}
	in.w = binary.BigEndian.Uint32(b[16:20])
	in.h = binary.BigEndian.Uint32(b[20:24])
	in.depth = b[24]
	in.typ = colorTypes[b[25]]
	if in.typ == "" {
		in.typ = fmt.Sprintf("type%d", b[25])
	}
	if countColors {
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			return in, err
		}
		in.colors, in.opaque = distinct(img)
	}
	return in, nil
}

// distinct counts the image's distinct colours (non-premultiplied RGBA, 8
// bits a channel as a PNG encoder sees them) and says whether all are opaque.
func distinct(img image.Image) (int, bool) {
	seen := make(map[uint32]struct{})
	opaque := true
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			c := toNRGBA(img, x, y)
			if c>>24 != 0xff {
				opaque = false
			}
			seen[c] = struct{}{}
		}
	}
	return len(seen), opaque
}

func toNRGBA(img image.Image, x, y int) uint32 {
	r, g, b, a := img.At(x, y).RGBA()
	if a != 0 && a != 0xffff {
		r, g, b = r*0xffff/a, g*0xffff/a, b*0xffff/a
	}
	return (a>>8)<<24 | (r>>8)<<16 | (g>>8)<<8 | b>>8
}

func main() {
	countColors := flag.Bool("colors", false, "decode and count distinct colours")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: pngstat [-colors] FILE|DIR...")
		flag.PrintDefaults()
	}
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("pngstat: ")
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	bad := false
	for _, arg := range flag.Args() {
		st, err := os.Stat(arg)
		if err != nil {
			log.Print(err)
			bad = true
			continue
		}
		if !st.IsDir() {
			in, err := inspect(arg, *countColors)
			if err != nil {
				log.Printf("%s: %v", arg, err)
				bad = true
				continue
			}
			fmt.Printf("file=%s bytes=%d size=%dx%d type=%s depth=%d", arg, in.bytes, in.w, in.h, in.typ, in.depth)
			if *countColors {
				fmt.Printf(" colors=%d opaque=%t", in.colors, in.opaque)
			}
			fmt.Println()
			continue
		}
		if !summarise(arg, *countColors) {
			bad = true
		}
	}
	if bad {
		os.Exit(1)
	}
}

func summarise(dir string, countColors bool) bool {
	var n, total, colorSum int64
	var colorMax, over256, flat int
	types := map[string]int{}
	ok := true
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".png") {
			return nil
		}
		in, err := inspect(p, countColors)
		if err != nil {
			log.Printf("%s: %v", p, err)
			ok = false
			return nil
		}
		n++
		total += in.bytes
		types[in.typ]++
		colorSum += int64(in.colors)
		colorMax = max(colorMax, in.colors)
		if in.colors > 256 {
			over256++
		}
		if in.colors == 1 {
			flat++
		}
		return nil
	})
	if err != nil {
		log.Print(err)
		return false
	}
	keys := make([]string, 0, len(types))
	for k := range types {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var ts []string
	for _, k := range keys {
		ts = append(ts, fmt.Sprintf("%s:%d", k, types[k]))
	}
	fmt.Printf("dir=%s files=%d bytes=%d mean_bytes=%.1f types=%s", dir, n, total, float64(total)/float64(max(1, n)), strings.Join(ts, ","))
	if countColors {
		fmt.Printf(" colors_mean=%.1f colors_max=%d over256=%d flat=%d", float64(colorSum)/float64(max(1, n)), colorMax, over256, flat)
	}
	fmt.Println()
	return ok
}
