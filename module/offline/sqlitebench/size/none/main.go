// Command none is the baseline of the size comparison: the same program
// with no driver, so the database/sql code is not counted for any driver.
package main

import (
	"database/sql"
	"fmt"
	"os"
)

func main() {
	db, err := sql.Open(os.Args[0], "x")
	fmt.Println(db, err)
}
