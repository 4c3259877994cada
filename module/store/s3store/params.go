package s3store

import (
	"context"
	"errors"
	"io"
	"net/url"
	"strings"

	"github.com/minio/minio-go/v7"

	"github.com/tilecache/caddy-tilecache/module/store"
)

// A tile set's parameter values are one small object beside the layer's
// generations, where every node sharing the bucket finds them:
//
//	<layer>/params/<gridset>/<format>/<params>   the canonical values (text)
func (s *Store) paramsKey(set store.Set) string {
	return s.layerPrefix(set.Layer) + "params/" + url.PathEscape(set.Gridset) + "/" +
		formatSegment(set.Format) + "/" + url.PathEscape(set.Params)
}

// RecordParams implements store.ParamsRecorder.
func (s *Store) RecordParams(set store.Set, canonical string) error {
	return s.call("params", func(ctx context.Context) error {
		_, err := s.client.PutObject(ctx, s.cfg.Bucket, s.paramsKey(set), strings.NewReader(canonical),
			int64(len(canonical)), minio.PutObjectOptions{ContentType: "text/plain", DisableMultipart: true})
		return err
	})
}

// RecordedParams implements store.ParamsRecorder.
func (s *Store) RecordedParams(set store.Set) (string, bool, error) {
	var out string
	err := s.call("params", func(ctx context.Context) error {
		body, _, _, err := s.core.GetObject(ctx, s.cfg.Bucket, s.paramsKey(set), minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		defer body.Close()
		b, err := io.ReadAll(io.LimitReader(body, 1<<20))
		out = string(b)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return "", false, nil
	}
	return out, err == nil, err
}
