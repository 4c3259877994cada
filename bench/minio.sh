# Sourced by the bench scripts that compare against the S3 store (S3=1).
#
# start_minio DIR: builds MinIO once (s3test/install.sh, pinned version),
# starts it on 127.0.0.1:$MINIO_PORT (console $MINIO_CONSOLE) with its data
# in DIR and the credentials in $MINIO_ROOT_USER/$MINIO_ROOT_PASSWORD, waits
# until it answers and makes the bucket "tiles". Sets MINIO_PID; the caller
# stops it. Needs $ROOT and die from the caller.
start_minio() {
	local minio i
	minio=$("$ROOT/module/store/s3store/s3test/install.sh") || die "building MinIO failed"
	"$minio" server "$1" --address "127.0.0.1:$MINIO_PORT" --console-address "127.0.0.1:$MINIO_CONSOLE" --quiet \
		>"$1.log" 2>&1 &
	MINIO_PID=$!
	for i in $(seq 100); do
		curl -sf -o /dev/null "http://127.0.0.1:$MINIO_PORT/minio/health/ready" && break
		((i < 100)) || die "MinIO did not answer within 20 s (log: $1.log)"
		sleep 0.2
	done
	curl -sf -X PUT --aws-sigv4 "aws:amz:us-east-1:s3" --user "$MINIO_ROOT_USER:$MINIO_ROOT_PASSWORD" \
		"http://127.0.0.1:$MINIO_PORT/tiles" || die "creating the bucket failed"
}

# s3_block PREFIX [EXTRA]: the tile_cache s3 block for that MinIO's bucket
# under PREFIX, with EXTRA (a local block) inside.
s3_block() {
	cat <<BLOCK
s3 {
			bucket tiles
			prefix $1
			endpoint 127.0.0.1:$MINIO_PORT
			region us-east-1
			path_style
			insecure
			access_key {env.MINIO_ROOT_USER}
			secret_key {env.MINIO_ROOT_PASSWORD}
			${2:-}
		}
BLOCK
}
