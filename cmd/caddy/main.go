// Command caddy is Caddy with the standard modules and this plugin: the
// same binary xcaddy.sh builds, without xcaddy. The tests build it to run
// Caddy as a separate process they can kill.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/tilecache/caddy-tilecache"
)

func main() {
	caddycmd.Main()
}
