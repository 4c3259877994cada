# Sourced by the bench scripts that seed through the REST interface (the
# tile_cache_admin mounted under /gwc/). Needs die from the caller.

# submit BASE LAYER JSON: POSTs a seed request, prints the task URL.
submit() {
	local hdr
	hdr=$(curl -s -m 10 -o /dev/null -D - -H 'Content-Type: application/json' -d "$3" \
		"$1/gwc/rest/seed/$2.json") || die "POST seed $2 failed"
	grep -q '^HTTP/1.1 200' <<<"$hdr" || die "POST seed $2: $(head -n1 <<<"$hdr")"
	awk 'tolower($1) == "location:" { sub(/\r$/, "", $2); print $2 }' <<<"$hdr"
}

# wait_task URL LIMIT_S: polls until DONE (dies on ABORTED or timeout);
# leaves the task's JSON in TASK_JSON.
wait_task() {
	local t0 st
	t0=$(date +%s)
	while :; do
		TASK_JSON=$(curl -s -m 5 "$1") || die "GET $1 failed"
		st=$(jq -r .state <<<"$TASK_JSON")
		[[ $st == DONE ]] && return 0
		[[ $st == ABORTED ]] && die "task aborted: $TASK_JSON"
		(($(date +%s) - t0 < $2)) || die "task not done after $2 s: $TASK_JSON"
		sleep 0.2
	done
}

# task_secs: seconds from started to finished, from TASK_JSON.
task_secs() {
	local a b
	a=$(date -d "$(jq -r .started <<<"$TASK_JSON")" +%s.%N)
	b=$(date -d "$(jq -r .finished <<<"$TASK_JSON")" +%s.%N)
	awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f\n", b - a }'
}
