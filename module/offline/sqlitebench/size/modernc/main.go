// Command modernc links the modernc driver into the size comparison's program.
package main

import (
	"database/sql"
	"fmt"

	_ "modernc.org/sqlite"
)

func main() {
	db, err := sql.Open("sqlite", "file::memory:")
	if err == nil {
		err = db.QueryRow("SELECT sqlite_version()").Scan(new(string))
	}
	fmt.Println(err)
}
