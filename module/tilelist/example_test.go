package tilelist_test

import (
	"fmt"
	"strings"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/tilelist"
)

func Example() {
	g, _ := gridset.Builtin("EPSG:900913")
	list := "# osm2pgsql expire list\n15/17599/10746\n15/17599/10746\n15/17598/10746\n"
	l, err := tilelist.Parse(strings.NewReader(list), tilelist.Options{
		Gridset: g, MetaW: 4, MetaH: 4,
		Parents:  14,            // also the z14 tile above each listed tile
		Children: tilelist.None, // no children
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(l.Lines(), "lines,", l.Tiles(), "tiles,", l.Units(), "units")
	l.Each(func(u tilelist.Unit) bool {
		fmt.Printf("z%d metatile %v: %d tiles, bounds %v\n", u.Z, u.Metatile(), u.Count(), u.Bounds())
		return true
	})
	// Rows are native (from the bottom): XYZ row 10746 of z15 is row
	// 32767-10746 = 22021, and its z14 parent row 11010 is XYZ row 5373.

	// Output:
	// 3 lines, 3 tiles, 2 units
	// z14 metatile {8796 11008 8799 11011}: 1 tiles, bounds {8799 11010 8799 11010}
	// z15 metatile {17596 22020 17599 22023}: 2 tiles, bounds {17598 22021 17599 22021}
}
