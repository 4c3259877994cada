// Package sqlitebench measures the pure-Go SQLite drivers that the offline
// packages could use, on the work they do: tens of thousands of blobs of map
// tile sizes inserted in batched transactions, then read back in one scan.
//
// It is a module of its own so that the drivers which lost the comparison
// stay out of the plugin's go.mod: the plugin's users download only the one
// that won (docs/offline.md, "SQLite driver"). Run it from this directory:
//
//	go test -run XXX -bench . -benchtime 1x
//
// The size/ programs are the same small program linked with each driver, for
// the size a driver adds to a binary:
//
//	for d in none modernc ncruces zombiezen; do go build -trimpath -ldflags='-s -w' -o /tmp/size-$d ./size/$d; done
package sqlitebench
