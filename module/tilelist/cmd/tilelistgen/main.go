// Command tilelistgen writes a synthetic expire list to standard output,
// for benchmarking the tile list parser and the seeding endpoint:
//
//	go run ./module/tilelist/cmd/tilelistgen -kind realistic -n 10000000 > expire.list
//	go run ./module/tilelist/cmd/tilelistgen -kind random -n 10000000 -z 18 > random.list
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/tilecache/caddy-tilecache/module/tilelist/internal/gen"
)

func main() {
	kind := flag.String("kind", "realistic", "realistic (clustered edits, levels minz..18, duplicates) or random (distinct random tiles at one level)")
	n := flag.Int64("n", 10_000_000, "lines to write")
	z := flag.Int("z", 18, "level of the random list")
	minZ := flag.Int("minz", 15, "lowest level of the realistic list")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	var err error
	switch *kind {
	case "realistic":
		err = gen.Realistic(os.Stdout, *n, *minZ, *seed)
	case "random":
		err = gen.Random(os.Stdout, *n, *z, *seed)
	default:
		err = fmt.Errorf("unknown kind %q", *kind)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tilelistgen:", err)
		os.Exit(1)
	}
}
