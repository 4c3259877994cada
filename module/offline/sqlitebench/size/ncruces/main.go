// Command ncruces links the ncruces driver into the size comparison's program.
package main

import (
	"database/sql"
	"fmt"

	_ "github.com/ncruces/go-sqlite3/driver"
)

func main() {
	db, err := sql.Open("sqlite3", "file::memory:")
	if err == nil {
		err = db.QueryRow("SELECT sqlite_version()").Scan(new(string))
	}
	fmt.Println(err)
}
