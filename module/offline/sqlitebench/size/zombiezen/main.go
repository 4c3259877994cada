// Command zombiezen links the zombiezen driver into the size comparison's program.
package main

import (
	"fmt"

	"zombiezen.com/go/sqlite"
)

func main() {
	c, err := sqlite.OpenConn(":memory:")
	if err == nil {
		err = c.Close()
	}
	fmt.Println(err)
}
